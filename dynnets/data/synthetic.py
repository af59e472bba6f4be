"""A seeded generator of sentiment treebanks whose labels are compositional.

Every tree is binary and every node carries a sentiment label 0..4 (0 very
negative, 2 neutral, 4 very positive), written in SST format. The labels are a
deterministic function of the words and the tree structure, computed by
:func:`label_tree` with the rules below; the generator only chooses words and
structure and then calls :func:`label_tree`.

Rules
-----
Work with the value ``v = label - 2`` in ``{-2, -1, 0, 1, 2}``.
``sign(v)`` is -1, 0 or 1 and ``clip(x) = max(-2, min(2, x))``.

Leaves.  ``v`` is the word's score in :data:`LEXICON` (mildly positive words
+1, e.g. ``good``; strongly positive +2, e.g. ``great``; mildly negative -1,
e.g. ``boring``; strongly negative -2, e.g. ``awful``); every other word,
including the operators below, is neutral (0). Words are matched exactly
(the generator writes lower case).

Internal node with children ``(L, R)``, first matching rule wins:

1. Negation: ``L`` is a leaf in :data:`NEGATORS` (``not``, ``never``,
   ``hardly``): ``v = -sign(v_R)``. Negation flips the polarity and leaves a
   mild sentiment: "not good" -1, "not great" -1, "not bad" +1,
   "not awful" +1, "not long" 0.
2. Intensifier: ``L`` is a leaf in :data:`INTENSIFIERS` (``very``,
   ``really``, ...): ``v = 2 * sign(v_R)``: "very good" +2, "very bad" -2.
3. Contrast phrase: ``L`` is the leaf ``but``: ``v = v_R``; the node is a
   *but-phrase*.
4. Contrast: ``R`` is a but-phrase: ``v = v_R`` if ``v_R != 0`` else ``v_L``.
   The clause after "but" decides unless it is neutral: "good but boring" -1,
   "boring but good" +1, "good but long" +1.
5. Otherwise (modification, predication, "and", punctuation, ...):
   ``v = clip(v_L + v_R)``; neutral material leaves the other side unchanged.

A unary node copies its child (value and but-phrase flag); nodes with more
than two children are outside the rules (``ValueError``).

Grammar
-------
A sentence is a left-branching chain of clauses joined by ``and`` or
``, but`` — ``((((c1 and c2) , but c3) and c4) .)`` — so after a "but" the
clauses that follow it decide, and in a long sentence the decisive clause is
often near the end. A clause is a subject noun phrase and a verb phrase, with
optional neutral material ("i think", "in the end", prepositional phrases);
noun phrases take adjectives and relative clauses (``that`` + verb phrase,
nesting up to ``max_depth``); predicates take negators, intensifiers and
coordinated adjectives ("good but boring"). The number of clauses follows a
truncated Zipf law, so lengths have a long tail (100+ tokens) while the
median is around a dozen tokens. Neutral words are the majority, so a model
must find the few sentiment words and the operators that govern them. A bag
of words cannot solve the task: "good but boring" and "boring but good" have
the same words and opposite labels, and "not" lowers "good" but raises "bad".
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Union

import numpy as np

from .trees import Tree, write_trees

__all__ = ["LEXICON", "NEGATORS", "INTENSIFIERS", "CONTRAST", "SyntheticConfig", "label_tree", "sentiment",
           "bag_of_words_label", "constructions", "from_brackets", "generate_trees", "generate_treebank",
           "write_treebank", "HANDWRITTEN", "handwritten_trees", "random_tree", "treebank_stats", "main"]

# ---------------------------------------------------------------------------
# Lexicon

_MILD_POS = ("good", "nice", "fine", "decent", "pleasant", "charming", "funny", "solid", "likable", "engaging",
             "clever", "warm")
_STRONG_POS = ("great", "brilliant", "wonderful", "superb", "excellent", "masterful", "terrific", "moving")
_MILD_NEG = ("bad", "dull", "boring", "weak", "flat", "bland", "tedious", "silly", "clumsy", "messy",
             "forgettable", "slow")
_STRONG_NEG = ("awful", "terrible", "dreadful", "painful", "horrible", "dismal", "unwatchable", "atrocious")

#: Sentiment score of every non-neutral word.
LEXICON: dict[str, int] = {
    **{w: 1 for w in _MILD_POS}, **{w: 2 for w in _STRONG_POS},
    **{w: -1 for w in _MILD_NEG}, **{w: -2 for w in _STRONG_NEG},
}
# Tuples fix the generator's choices (a frozenset's order changes with the hash seed).
_NEGATOR_WORDS = ("not", "never", "hardly")
_INTENSIFIER_WORDS = ("very", "really", "extremely", "truly", "incredibly", "remarkably")
NEGATORS = frozenset(_NEGATOR_WORDS)
INTENSIFIERS = frozenset(_INTENSIFIER_WORDS)
CONTRAST = "but"

_SENTIMENT_ADJ = _MILD_POS + _STRONG_POS + _MILD_NEG + _STRONG_NEG
_NEUTRAL_ADJ = ("new", "old", "long", "short", "french", "second", "small", "recent", "young", "quiet", "big",
                "local", "italian", "early", "final", "black-and-white", "animated", "low-budget")
_NOUNS = ("film", "movie", "story", "plot", "script", "cast", "director", "ending", "dialogue", "soundtrack",
          "performance", "premise", "pacing", "sequel", "comedy", "drama", "thriller", "documentary", "character",
          "hero", "villain", "score", "screenplay", "finale", "opening", "twist", "setting", "scene", "actor",
          "romance", "remake", "musical", "western", "narrator", "camera", "editing")
_DETS = ("the", "a", "this", "its", "every")
_COPULAS = ("is", "was", "seems", "feels", "looks", "remains", "becomes")
_VERBS = (("offers", "offer"), ("features", "feature"), ("has", "have"), ("delivers", "deliver"),
          ("shows", "show"), ("includes", "include"), ("gives", "give"), ("finds", "find"))
_PREPS = ("about", "with", "from", "in", "by", "of", "for", "after")
_PREFIXES = (("i", "think"), ("i", "suspect"), ("critics", "say", "that"), ("we", "learn", "that"),
             ("most", "viewers", "feel", "that"), ("it", "turns", "out", "that"), ("as", "expected", ","),
             ("frankly", ","), ("honestly", ","), ("of", "course", ","))
_FILLERS = (("in", "the", "end"), ("for", "the", "most", "part"), ("at", "times"), ("on", "the", "whole"),
            ("from", "start", "to", "finish"), ("in", "a", "way"), ("as", "far", "as", "i", "can", "tell"),
            ("all", "things", "considered"), ("if", "you", "ask", "me"), ("at", "the", "end", "of", "the", "day"),
            ("in", "many", "ways"), ("for", "what", "it", "is", "worth"), ("by", "the", "way"),
            ("in", "the", "second", "half"), ("on", "a", "rainy", "afternoon"), ("to", "some", "degree"),
            ("at", "least", "on", "paper"), ("in", "its", "own", "way"), ("for", "two", "hours"),
            ("more", "or", "less"))
_NEUTRAL_VPS = (("runs", "two", "hours"), ("takes", "place", "in", "paris"), ("opens", "this", "friday"),
                ("was", "shot", "in", "winter"), ("stars", "a", "newcomer"), ("is", "based", "on", "a", "novel"),
                ("lasts", "ninety", "minutes"), ("is", "in", "french"), ("follows", "a", "family"),
                ("came", "out", "last", "year"))


# ---------------------------------------------------------------------------
# Labelling rules


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def _clip(v: int) -> int:
    return -2 if v < -2 else (2 if v > 2 else v)


def _combine(lv: int, lword: str | None, rv: int, r_but: bool, seen: set[str] | None = None) -> tuple[int, bool]:
    """Rules 1-5: value and but-phrase flag of a node with children (L, R).
    ``lword`` is L's word when L is a leaf. ``seen`` collects the rules that changed a value."""
    if lword is not None:
        if lword in NEGATORS:
            v = -_sign(rv)
            if seen is not None and v != rv:
                seen.add("negation")
            return v, False
        if lword in INTENSIFIERS:
            v = 2 * _sign(rv)
            if seen is not None and v != rv:
                seen.add("intensifier")
            return v, False
        if lword == CONTRAST:
            return rv, True
    if r_but:
        v = rv if rv != 0 else lv
        if seen is not None and v != _clip(lv + rv):
            seen.add("contrast")
        return v, False
    return _clip(lv + rv), False


def _evaluate(tree: Tree, seen: set[str] | None = None) -> list[tuple[int, bool]]:
    """(value, but-phrase) of every node in postorder."""
    out: list[tuple[int, bool]] = []
    stack: list[tuple[int, bool]] = []
    for n in tree.postorder():
        k = len(n.children)
        if k == 0:
            r = (LEXICON.get(n.word, 0), False)
        elif k == 1:
            r = stack.pop()
        elif k == 2:
            rv, rb = stack.pop()
            lv, _ = stack.pop()
            left = n.children[0]
            r = _combine(lv, left.word, rv, rb, seen)
        else:
            raise ValueError(f"label_tree: the synthetic rules are defined for binary trees, got a node with "
                             f"{k} children: {str(n)[:80]}")
        stack.append(r)
        out.append(r)
    return out


def label_tree(tree: Tree) -> Tree:
    """A copy of ``tree`` with every label computed by the module's rules (existing labels are ignored)."""
    vals = _evaluate(tree)
    return tree.with_labels([v + 2 for v, _ in vals])


def sentiment(tree: Tree) -> int:
    """Root label 0..4 by the module's rules."""
    return _evaluate(tree)[-1][0] + 2


def constructions(tree: Tree) -> set[str]:
    """Which of ``"negation"``, ``"intensifier"``, ``"contrast"`` changed some node's value
    (relative to rule 5 for contrast, to the unmodified phrase otherwise)."""
    seen: set[str] = set()
    _evaluate(tree, seen)
    return seen


def bag_of_words_label(words: Iterable[str]) -> int:
    """What the rules would give if structure were ignored: ``clip(sum of word scores) + 2``."""
    return _clip(sum(LEXICON.get(w, 0) for w in words)) + 2


# ---------------------------------------------------------------------------
# Unlabelled bracket trees (hand-written sentences)


def from_brackets(text: str) -> Tree:
    """Parse an unlabelled bracketed tree such as ``((the film) (is (not good)))``
    (bare words are leaves) and label it with :func:`label_tree`."""
    import re

    toks = re.findall(r"\(|\)|[^\s()]+", text)
    stack: list[list[Tree]] = [[]]
    for i, t in enumerate(toks):
        if t == "(":
            stack.append([])
        elif t == ")":
            if len(stack) < 2 or not stack[-1]:
                raise ValueError(f"from_brackets: unbalanced or empty brackets at token {i} of {text!r}")
            kids = stack.pop()
            stack[-1].append(kids[0] if len(kids) == 1 else Tree.node(2, tuple(kids)))
        else:
            stack[-1].append(Tree.leaf(2, t))
    if len(stack) != 1 or len(stack[0]) != 1:
        raise ValueError(f"from_brackets: expected one balanced tree, got {text!r}")
    return label_tree(stack[0][0])


#: Hand-written sentences (unlabelled, binary), labelled by the same rules.
HANDWRITTEN: tuple[str, ...] = (
    "((it (is good)) .)",
    "((it (is (not good))) .)",
    "((it (is bad)) .)",
    "((it (is (not bad))) .)",
    "((it (is (very good))) .)",
    "((it (is (really bad))) .)",
    "((it (is (not (very good)))) .)",
    "((it (is (not awful))) .)",
    "(((the film) (is (good (but boring)))) .)",
    "(((the film) (is (boring (but good)))) .)",
    "(((the plot) (is (dull (and slow)))) .)",
    "(((((the acting) (is great)) ,) (but ((the script) (is terrible)))) .)",
    "(((((the script) (is terrible)) ,) (but ((the acting) (is great)))) .)",
    "(((((the story) (is (not (very clever)))) ,) (but ((the cast) (is charming)))) .)",
    "(((the movie) (is (never boring))) .)",
    "(((the ending) (does (not (feel (very moving))))) .)",
    "(((the (new film)) (does (not (offer (a (single (good scene))))))) .)",
    "(((a (really (funny comedy))) (that (is (not (too long))))) .)",
    "((((the director) (is clever)) (and ((the score) (is wonderful)))) .)",
    "((((((the director) (is clever)) (and ((the score) (is wonderful)))) ,) "
    "(but ((the film) (is (hardly engaging))))) .)",
    "(((i think) ((the film) (is (very bland)))) .)",
    "((((in (the end)) ,) ((the twist) (is clever))) .)",
    "(((this remake) (has (a (great cast)))) .)",
    "(((this remake) (has ((a cast) (that (is (not great)))))) .)",
    "(((((the sequel) (is (not bad))) ,) (but (it (is (not (very good)))))) .)",
    "(((the villain) (is ((extremely silly) (but (very funny))))) .)",
    "(((the documentary) (runs (two hours))) .)",
    "((((the documentary) (runs (two hours))) (and (it (is (never dull))))) .)",
    "(((((the hero) (is bland)) ,) (but ((the villain) (is masterful)))) .)",
    "(((the (early scenes)) (are (slow (but moving)))) .)",
    "(((the finale) (is ((not terrible) (but (not great))))) .)",
    "((((every scene) (looks wonderful)) (and ((every line) (sounds awful)))) .)",
    "(((((the premise) (is silly)) ,) (but ((the film) (is (not boring))))) .)",
    "(((frankly ,) ((the musical) (is (hardly (a (solid film)))))) .)",
    "((((((the film) (is long)) (and ((the plot) (is (not new))))) ,) (but ((the actors) (are superb)))) .)",
    "(((((((the film) (is charming)) ,) (but ((the pacing) (is (really slow))))) ,) "
    "(but ((the ending) (is brilliant)))) .)",
)


def handwritten_trees() -> list[Tree]:
    """:data:`HANDWRITTEN` as labelled trees."""
    return [from_brackets(s) for s in HANDWRITTEN]


# ---------------------------------------------------------------------------
# Generator

_Struct = Union[str, tuple]  # a word, or a pair (left, right) of _Struct


@dataclass(frozen=True)
class SyntheticConfig:
    """Knobs of the generator; the defaults produce the shipped samples.

    Attributes
    ----------
    clause_zipf : float
        Clauses per sentence follow ``P(k) ~ k**-clause_zipf`` (``k <= max_clauses``);
        smaller values give a heavier tail of long sentences.
    max_clauses : int
    p_but : float
        A clause after the first is joined with ", but" (else "and").
    p_prefix, p_filler : float
        A clause starts with "i think"-like material / ends with a neutral
        filler phrase ("in the end", "for the most part", ...).
    p_neutral_clause : float
        A clause's verb phrase is purely neutral ("runs two hours").
    p_object : float
        The verb phrase is verb + object ("offers a good cast") rather than a predicate.
    p_negation, p_intensifier, p_coordination : float
        A predicate / verb phrase is negated; an adjective is intensified; a
        predicate is two coordinated adjectives ("good but boring").
    p_sentiment_adj : float
        An adjective is a sentiment word (else a neutral one such as "french").
    p_attributive : float
        A noun phrase has an adjective.
    p_relative, p_pp : float
        A noun phrase gets a relative clause / a prepositional phrase; both
        halve with each level of nesting.
    max_depth : int
        Nesting limit for noun phrases inside relative clauses and prepositional phrases.
    p_period : float
        The sentence ends with ".".
    """

    clause_zipf: float = 2.0
    max_clauses: int = 20
    p_but: float = 0.45
    p_prefix: float = 0.12
    p_filler: float = 0.3
    p_neutral_clause: float = 0.15
    p_object: float = 0.3
    p_negation: float = 0.35
    p_intensifier: float = 0.25
    p_coordination: float = 0.12
    p_sentiment_adj: float = 0.75
    p_attributive: float = 0.3
    p_relative: float = 0.2
    p_pp: float = 0.2
    max_depth: int = 3
    p_period: float = 0.9


class _Gen:
    def __init__(self, rng: np.random.Generator, cfg: SyntheticConfig):
        self.rng = rng
        self.cfg = cfg
        k = np.arange(1, cfg.max_clauses + 1, dtype=np.float64)
        p = k ** -cfg.clause_zipf
        self.clause_p = p / p.sum()

    def coin(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    @staticmethod
    def phrase(words: Sequence[str]) -> _Struct:
        """Right-branching binary structure over a word sequence."""
        s: _Struct = words[-1]
        for w in reversed(words[:-1]):
            s = (w, s)
        return s

    def adjective(self, sentiment_ok: bool = True) -> _Struct:
        c = self.cfg
        if sentiment_ok and self.coin(c.p_sentiment_adj):
            adj: _Struct = self.pick(_SENTIMENT_ADJ)
        else:
            adj = self.pick(_NEUTRAL_ADJ)
        if self.coin(c.p_intensifier):
            adj = (self.pick(_INTENSIFIER_WORDS), adj)
        return adj

    def noun_phrase(self, depth: int) -> _Struct:
        c = self.cfg
        if depth == 0 and self.coin(0.15):
            return "it"
        nom: _Struct = self.pick(_NOUNS)
        if self.coin(c.p_attributive):
            nom = (self.adjective(), nom)
        det = self.pick(_DETS)
        if det == "a":
            first = nom
            while not isinstance(first, str):
                first = first[0]
            if first[0] in "aeiou":
                det = "an"
        np_: _Struct = (det, nom)
        scale = 0.5 ** depth
        if depth < c.max_depth and self.coin(c.p_pp * scale):
            np_ = (np_, (self.pick(_PREPS), self.noun_phrase(depth + 1)))
        if depth < c.max_depth and self.coin(c.p_relative * scale):
            np_ = (np_, ("that", self.verb_phrase(depth + 1)))
        return np_

    def predicate(self) -> _Struct:
        c = self.cfg
        if self.coin(c.p_coordination):
            first = self.adjective()
            pred: _Struct = (first, (self.pick(("and", CONTRAST)), self.adjective()))
        else:
            pred = self.adjective()
        if self.coin(c.p_negation):
            pred = (self.pick(("not", "not", "never", "hardly")), pred)
        return (self.pick(_COPULAS), pred)

    def verb_phrase(self, depth: int) -> _Struct:
        c = self.cfg
        if self.coin(c.p_neutral_clause):
            return self.phrase(self.pick(_NEUTRAL_VPS))
        if not self.coin(c.p_object):
            return self.predicate()
        third, base = self.pick(_VERBS)
        obj = self.noun_phrase(depth + 1)
        if self.coin(c.p_negation):
            if self.coin(0.5):
                return ("does", ("not", (base, obj)))
            return (self.pick(("never", "hardly")), (third, obj))
        return (third, obj)

    def clause(self) -> _Struct:
        c = self.cfg
        cl: _Struct = (self.noun_phrase(0), self.verb_phrase(0))
        if self.coin(c.p_filler):
            filler = self.phrase(self.pick(_FILLERS))
            cl = ((filler, ","), cl) if self.coin(0.4) else (cl, filler)
        if self.coin(c.p_prefix):
            cl = (self.phrase(self.pick(_PREFIXES)), cl)
        return cl

    def sentence(self) -> _Struct:
        c = self.cfg
        n = 1 + int(self.rng.choice(len(self.clause_p), p=self.clause_p))
        s = self.clause()
        for _ in range(n - 1):
            if self.coin(c.p_but):
                s = ((s, ","), (CONTRAST, self.clause()))
            else:
                s = (s, ("and", self.clause()))
        if self.coin(c.p_period):
            s = (s, ".")
        return s


def _struct_to_tree(s: _Struct) -> Tree:
    """Nested pairs of words -> Tree (iteratively), labelled by :func:`label_tree`."""
    results: list[Tree] = []
    stack: list[tuple[_Struct, bool]] = [(s, False)]
    while stack:
        item, expanded = stack.pop()
        if isinstance(item, str):
            results.append(Tree.leaf(2, item))
        elif expanded:
            right = results.pop()
            left = results.pop()
            results.append(Tree.node(2, (left, right)))
        else:
            stack.append((item, True))
            stack.append((item[1], False))
            stack.append((item[0], False))
    return label_tree(results[0])


def generate_trees(n: int, rng: np.random.Generator, config: SyntheticConfig | None = None) -> list[Tree]:
    """``n`` labelled binary trees drawn with ``rng`` (``numpy.random.default_rng(seed)``)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"generate_trees: rng must be a numpy.random.Generator, got {type(rng).__name__}")
    g = _Gen(rng, config or SyntheticConfig())
    return [_struct_to_tree(g.sentence()) for _ in range(n)]


def generate_treebank(seed: int = 0, n_train: int = 600, n_dev: int = 150, n_test: int = 150,
                      config: SyntheticConfig | None = None, handwritten: bool = True) -> dict[str, list[Tree]]:
    """The sample treebank: splits drawn in order train, dev, test from one
    ``default_rng(seed)``; the :data:`HANDWRITTEN` sentences are appended to test."""
    rng = np.random.default_rng(seed)
    out = {"train": generate_trees(n_train, rng, config), "dev": generate_trees(n_dev, rng, config),
           "test": generate_trees(n_test, rng, config)}
    if handwritten:
        out["test"] = out["test"] + handwritten_trees()
    return out


def write_treebank(directory: str | Path, splits: dict[str, list[Tree]]) -> dict[str, Path]:
    """Write ``<split>.txt`` files (atomically) into ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, trees in splits.items():
        out[name] = d / f"{name}.txt"
        write_trees(out[name], trees)
    return out


# ---------------------------------------------------------------------------
# Random shapes (for tests of tree code)


def random_tree(rng: np.random.Generator, n_leaves: int, *, max_children: int = 2, num_classes: int = 5,
                vocab: Sequence[str] = ("a", "b", "c", "d", "e")) -> Tree:
    """A random tree with ``n_leaves`` leaves and random labels/words.

    With ``max_children=2`` the tree is binary; larger values give n-ary nodes
    (and ``max_children=1`` is not allowed). Shapes come from repeatedly
    merging 2..max_children adjacent subtrees, so heights vary widely.
    """
    if n_leaves < 1:
        raise ValueError(f"random_tree: n_leaves must be >= 1, got {n_leaves}")
    if max_children < 2:
        raise ValueError(f"random_tree: max_children must be >= 2, got {max_children}")
    nodes = [Tree.leaf(int(rng.integers(num_classes)), vocab[int(rng.integers(len(vocab)))]) for _ in range(n_leaves)]
    while len(nodes) > 1:
        k = int(rng.integers(2, min(max_children, len(nodes)) + 1))
        i = int(rng.integers(len(nodes) - k + 1))
        nodes[i:i + k] = [Tree.node(int(rng.integers(num_classes)), tuple(nodes[i:i + k]))]
    return nodes[0]


# ---------------------------------------------------------------------------
# Statistics and command line


def treebank_stats(trees: Sequence[Tree]) -> dict[str, Any]:
    """Counts, length quantiles, root-label distribution, and how often a bag of words
    (:func:`bag_of_words_label`) or the root's constructions disagree with the rules."""
    lengths = np.array([len(t.leaves()) for t in trees])
    roots = Counter(t.label for t in trees)
    bow_wrong = sum(bag_of_words_label(t.words()) != t.label for t in trees)
    cons = Counter(c for t in trees for c in constructions(t))
    return {
        "trees": len(trees),
        "tokens": int(lengths.sum()),
        "length_min": int(lengths.min()), "length_median": float(np.median(lengths)),
        "length_mean": round(float(lengths.mean()), 1), "length_p90": float(np.percentile(lengths, 90)),
        "length_max": int(lengths.max()), "n_100_plus": int((lengths >= 100).sum()),
        "height_max": max(t.height for t in trees),
        "root_labels": {k: roots.get(k, 0) for k in range(5)},
        "bag_of_words_wrong": round(bow_wrong / len(trees), 3),
        "constructions": dict(sorted(cons.items())),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dynnets.data.synthetic",
                                description="Generate the compositional sample treebank (SST format).")
    p.add_argument("--out", type=Path, help="directory to write train.txt, dev.txt, test.txt into")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train", type=int, default=600)
    p.add_argument("--dev", type=int, default=150)
    p.add_argument("--test", type=int, default=150)
    p.add_argument("--no-handwritten", action="store_true", help="do not append the hand-written sentences to test")
    p.add_argument("--stats", type=Path, metavar="DIR", help="print statistics of the treebank in DIR and exit")
    for f in fields(SyntheticConfig):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    a = p.parse_args(argv)
    if a.stats is not None:
        from .sst import load_sst

        print("| split | trees | tokens | length min / median / mean / p90 / max | 100+ tokens | max height "
              "| root labels 0/1/2/3/4 | bag of words wrong "
              "| trees where negation / intensifier / contrast changes a value |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, trees in load_sst(a.stats).items():
            st = treebank_stats(trees)
            c = st["constructions"]
            print(f"| {name} | {st['trees']} | {st['tokens']} | {st['length_min']} / {st['length_median']:g} / "
                  f"{st['length_mean']} / {st['length_p90']:.0f} / {st['length_max']} | {st['n_100_plus']} | "
                  f"{st['height_max']} | {'/'.join(str(v) for v in st['root_labels'].values())} | "
                  f"{100 * st['bag_of_words_wrong']:.0f}% | {c.get('negation', 0)} / {c.get('intensifier', 0)} / "
                  f"{c.get('contrast', 0)} |")
        return 0
    if a.out is None:
        p.error("--out DIR (or --stats DIR) is required")
    cfg = SyntheticConfig(**{f.name: getattr(a, f.name) for f in fields(SyntheticConfig)})
    splits = generate_treebank(a.seed, a.train, a.dev, a.test, cfg, handwritten=not a.no_handwritten)
    for name, path in write_treebank(a.out, splits).items():
        print(f"wrote {path} ({len(splits[name])} trees, {path.stat().st_size} bytes)")
    if cfg != SyntheticConfig():
        print("config:", {k: v for k, v in asdict(cfg).items() if v != getattr(SyntheticConfig(), k)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
