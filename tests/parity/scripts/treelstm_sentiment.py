"""Binary (constituency) Tree-LSTM for sentiment on SST, one file.

Written in the style of the early PyTorch Tree-LSTM sentiment repositories
(ttpro1995/TreeLSTMSentiment: ``model.py``, ``trainer.py``, ``dataset.py``,
``utils.py``, ``metrics.py``, ``sentiment.py``), which were written for
PyTorch 0.1-0.3 and still run on today's torch: ``Variable`` wrappers with
``volatile=True``, ``err.data[0]``, ``F.torch.*`` calls, ``torch.Tensor(n)``
and ``torch.LongTensor(1)`` constructors, ``torch.range``, a loss summed over
every labelled node inside the recursion, a separate embedding model updated by
hand with ``f.data.sub_(f.grad.data * lr)``, Adagrad over a param-group list,
``state_dict()['weight'].copy_(emb)`` and whole-model ``torch.save``.

Only the GloVe lookup is replaced: the pretrained matrix is drawn with
``normal_`` (the original's initialisation of words GloVe lacks).
"""
from __future__ import print_function

import argparse
import gc
import math
import os
from copy import deepcopy

import numpy as np
from tqdm import tqdm

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data as data
from torch.autograd import Variable as Var


# ---------------------------------------------------------------- Constants.py
PAD = 0
UNK = 1
BOS = 2
EOS = 3
PAD_WORD = '<blank>'
UNK_WORD = '<unk>'
BOS_WORD = '<s>'
EOS_WORD = '</s>'


# ---------------------------------------------------------------- config.py
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description='PyTorch TreeLSTM for Sentiment Analysis Trees')
    parser.add_argument('--name', default='default_name', help='name for log and saved models')
    parser.add_argument('--saved', default='saved_model', help='name for log and saved models')
    parser.add_argument('--model_name', default='constituency', help='model name constituency or dependency')
    parser.add_argument('--data', default='data/sst/', help='path to dataset')
    parser.add_argument('--batchsize', default=25, type=int, help='batchsize for optimizer updates')
    parser.add_argument('--epochs', default=10, type=int, help='number of total epochs to run')
    parser.add_argument('--lr', default=0.05, type=float, metavar='LR', help='initial learning rate')
    parser.add_argument('--emblr', default=0.1, type=float, metavar='EMLR', help='initial embedding learning rate')
    parser.add_argument('--wd', default=1e-4, type=float, help='weight decay (default: 1e-4)')
    parser.add_argument('--optim', default='adagrad', help='optimizer (default: adagrad)')
    parser.add_argument('--seed', default=123, type=int, help='random seed (default: 123)')
    parser.add_argument('--fine_grain', default=0, type=int, help='fine grained (default 0 - binary mode)')
    parser.add_argument('--input_dim', default=300, type=int)
    parser.add_argument('--mem_dim', default=150, type=int)
    parser.add_argument('--dropout', default=1, type=int, help='dropout in the output module')
    parser.add_argument('--init', default=None, help='.npz of both models\' initial weights (the parity test)')
    parser.add_argument('--dump_init', default=None, help='write the initial weights here as .npz')
    cuda_parser = parser.add_mutually_exclusive_group(required=False)
    cuda_parser.add_argument('--cuda', dest='cuda', action='store_true')
    cuda_parser.add_argument('--no-cuda', dest='cuda', action='store_false')
    parser.set_defaults(cuda=True)
    args = parser.parse_args(argv)
    return args


# ---------------------------------------------------------------- tree.py / vocab.py
class Tree(object):
    def __init__(self):
        self.parent = None
        self.num_children = 0
        self.children = list()
        self.gold_label = None
        self.output = None

    def add_child(self, child):
        child.parent = self
        self.num_children += 1
        self.children.append(child)


class Vocab(object):
    def __init__(self, filename=None, data=None, lower=False):
        self.idxToLabel = {}
        self.labelToIdx = {}
        self.lower = lower
        self.special = []
        if data is not None:
            self.addSpecials(data)
        if filename is not None:
            self.loadFile(filename)

    def size(self):
        return len(self.idxToLabel)

    def loadFile(self, filename):
        for line in open(filename):
            token = line.rstrip('\n')
            self.add(token)

    def getIndex(self, key, default=None):
        try:
            return self.labelToIdx[key]
        except KeyError:
            return default

    def addSpecials(self, labels):
        for label in labels:
            self.special += [self.add(label)]

    def add(self, label):
        if label in self.labelToIdx:
            idx = self.labelToIdx[label]
        else:
            idx = len(self.idxToLabel)
            self.idxToLabel[idx] = label
            self.labelToIdx[label] = idx
        return idx

    def convertToIdx(self, labels, unkWord, bosWord=None, eosWord=None):
        unk = self.getIndex(unkWord)
        return [self.getIndex(label, default=unk) for label in labels]


# ---------------------------------------------------------------- utils.py
def map_label_to_target_sentiment(label, num_classes=0, fine_grain=False):
    # num_classes not use yet
    target = torch.LongTensor(1)
    target[0] = int(label)  # nothing to do here as we preprocess data
    return target


def count_param(model):
    params = list(model.parameters())
    sum_param = 0
    for p in params:
        sum_param += p.numel()
    return sum_param


# ---------------------------------------------------------------- dataset.py
class SSTDataset(data.Dataset):
    def __init__(self, path, vocab, num_classes, fine_grain, model_name):
        super(SSTDataset, self).__init__()
        self.vocab = vocab
        self.num_classes = num_classes
        self.fine_grain = fine_grain
        self.model_name = model_name

        temp_sentences = self.read_sentences(os.path.join(path, 'sents.toks'))
        temp_trees = self.read_trees(os.path.join(path, 'parents.txt'), os.path.join(path, 'labels.txt'))

        self.labels = []
        if not self.fine_grain:
            # only get pos or neg
            new_trees = []
            new_sentences = []
            for i in range(len(temp_trees)):
                if temp_trees[i].gold_label != 1:  # 0 neg, 1 neutral, 2 pos
                    new_trees.append(temp_trees[i])
                    new_sentences.append(temp_sentences[i])
            self.trees = new_trees
            self.sentences = new_sentences
        else:
            self.trees = temp_trees
            self.sentences = temp_sentences

        for i in range(0, len(self.trees)):
            self.labels.append(self.trees[i].gold_label)
        self.labels = torch.Tensor(self.labels)  # let labels be tensor
        self.size = len(self.trees)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        tree = deepcopy(self.trees[index])
        sent = deepcopy(self.sentences[index])
        label = deepcopy(self.labels[index])
        return (tree, sent, label)

    def read_sentences(self, filename):
        with open(filename, 'r') as f:
            sentences = [self.read_sentence(line) for line in tqdm(f.readlines(), disable=True)]
        return sentences

    def read_sentence(self, line):
        indices = self.vocab.convertToIdx(line.split(), UNK_WORD)
        return torch.LongTensor(indices)

    def read_trees(self, filename_parents, filename_labels):
        pfile = open(filename_parents, 'r')  # parent node
        lfile = open(filename_labels, 'r')  # label node
        p = pfile.readlines()
        l = lfile.readlines()
        pl = zip(p, l)  # (parent, label) tuple
        trees = [self.read_tree(p_line, l_line) for p_line, l_line in tqdm(pl, disable=True)]
        return trees

    def parse_dlabel_token(self, x):
        if x == '#':
            return None
        else:
            if self.fine_grain:  # -2 -1 0 1 2 => 0 1 2 3 4
                return int(x) + 2
            else:  # -2 -1 0 1 2 => 0 1 2
                tmp = int(x)
                if tmp < 0:
                    return 0
                elif tmp == 0:
                    return 1
                elif tmp > 0:
                    return 2

    def read_tree(self, line, label_line):
        parents = list(map(int, line.split()))
        trees = dict()
        root = None
        labels = list(map(self.parse_dlabel_token, label_line.split()))
        for i in range(1, len(parents) + 1):
            if i not in trees.keys() and parents[i - 1] != -1:
                idx = i
                prev = None
                while True:
                    parent = parents[idx - 1]
                    if parent == -1:
                        break
                    tree = Tree()
                    if prev is not None:
                        tree.add_child(prev)
                    trees[idx] = tree
                    tree.idx = idx
                    tree.gold_label = labels[idx - 1]
                    if parent in trees.keys():
                        trees[parent].add_child(tree)
                        break
                    elif parent == 0:
                        root = tree
                        break
                    else:
                        prev = tree
                        idx = parent
        return root


# ---------------------------------------------------------------- model.py
class BinaryTreeLeafModule(nn.Module):
    def __init__(self, cuda, in_dim, mem_dim):
        super(BinaryTreeLeafModule, self).__init__()
        self.cudaFlag = cuda
        self.in_dim = in_dim
        self.mem_dim = mem_dim

        self.cx = nn.Linear(self.in_dim, self.mem_dim)
        self.ox = nn.Linear(self.in_dim, self.mem_dim)
        if self.cudaFlag:
            self.cx = self.cx.cuda()
            self.ox = self.ox.cuda()

    def forward(self, input):
        c = self.cx(input)
        o = F.sigmoid(self.ox(input))
        h = o * F.tanh(c)
        return c, h


class BinaryTreeComposer(nn.Module):
    def __init__(self, cuda, in_dim, mem_dim):
        super(BinaryTreeComposer, self).__init__()
        self.cudaFlag = cuda
        self.in_dim = in_dim
        self.mem_dim = mem_dim

        def new_gate():
            lh = nn.Linear(self.mem_dim, self.mem_dim)
            rh = nn.Linear(self.mem_dim, self.mem_dim)
            return lh, rh

        self.ilh, self.irh = new_gate()
        self.lflh, self.lfrh = new_gate()
        self.rflh, self.rfrh = new_gate()
        self.ulh, self.urh = new_gate()

    def forward(self, lc, lh, rc, rh):
        i = F.sigmoid(self.ilh(lh) + self.irh(rh))
        lf = F.sigmoid(self.lflh(lh) + self.lfrh(rh))
        rf = F.sigmoid(self.rflh(lh) + self.rfrh(rh))
        update = F.tanh(self.ulh(lh) + self.urh(rh))
        c = i * update + lf * lc + rf * rc
        h = F.tanh(c)
        return c, h


class BinaryTreeLSTM(nn.Module):
    def __init__(self, cuda, in_dim, mem_dim, criterion):
        super(BinaryTreeLSTM, self).__init__()
        self.cudaFlag = cuda
        self.in_dim = in_dim
        self.mem_dim = mem_dim
        self.criterion = criterion

        self.leaf_module = BinaryTreeLeafModule(cuda, in_dim, mem_dim)
        self.composer = BinaryTreeComposer(cuda, in_dim, mem_dim)
        self.output_module = None

    def set_output_module(self, output_module):
        self.output_module = output_module

    def forward(self, tree, embs, training=False):
        loss = Var(torch.zeros(1))  # init zero loss
        if self.cudaFlag:
            loss = loss.cuda()

        if tree.num_children == 0:
            # leaf case
            tree.state = self.leaf_module.forward(embs[tree.idx - 1])
        else:
            for idx in range(tree.num_children):
                _, child_loss = self.forward(tree.children[idx], embs, training)
                loss = loss + child_loss
            lc, lh, rc, rh = self.get_child_state(tree)
            tree.state = self.composer.forward(lc, lh, rc, rh)

        if self.output_module != None:
            output = self.output_module.forward(tree.state[1], training)
            tree.output = output
            if training and tree.gold_label != None:
                target = Var(map_label_to_target_sentiment(tree.gold_label))
                if self.cudaFlag:
                    target = target.cuda()
                loss = loss + self.criterion(output, target)
        return tree.state, loss

    def get_child_state(self, tree):
        lc, lh = tree.children[0].state
        rc, rh = tree.children[1].state
        return lc, lh, rc, rh


class SentimentModule(nn.Module):
    def __init__(self, cuda, mem_dim, num_classes, dropout=False):
        super(SentimentModule, self).__init__()
        self.cudaFlag = cuda
        self.mem_dim = mem_dim
        self.num_classes = num_classes
        self.dropout = dropout
        self.l1 = nn.Linear(self.mem_dim, self.num_classes)
        self.logsoftmax = nn.LogSoftmax()
        if self.cudaFlag:
            self.l1 = self.l1.cuda()

    def forward(self, vec, training=False):
        if self.dropout:
            out = self.logsoftmax(self.l1(F.dropout(vec, training=training)))
        else:
            out = self.logsoftmax(self.l1(vec))
        return out


class TreeLSTMSentiment(nn.Module):
    def __init__(self, cuda, vocab_size, in_dim, mem_dim, num_classes, model_name, criterion, dropout=True):
        super(TreeLSTMSentiment, self).__init__()
        self.cudaFlag = cuda
        self.model_name = model_name
        self.tree_module = BinaryTreeLSTM(cuda, in_dim, mem_dim, criterion)
        self.output_module = SentimentModule(cuda, mem_dim, num_classes, dropout=dropout)
        self.tree_module.set_output_module(self.output_module)

    def forward(self, tree, inputs, training=False):
        tree_state, loss = self.tree_module(tree, inputs, training)
        output = tree.output
        return output, loss


# ---------------------------------------------------------------- metrics.py
class Metrics():
    def __init__(self, num_classes):
        self.num_classes = num_classes

    def mse(self, predictions, labels):
        x = Var(deepcopy(predictions), volatile=True)
        y = Var(deepcopy(labels), volatile=True)
        return nn.MSELoss()(x, y).data[0]

    def sentiment_accuracy_score(self, predictions, labels, fine_gained=True):
        correct = (predictions == labels).sum()
        total = labels.size(0)
        acc = float(correct) / total
        return acc


# ---------------------------------------------------------------- trainer.py
class SentimentTrainer(object):
    def __init__(self, args, model, embedding_model, criterion, optimizer):
        super(SentimentTrainer, self).__init__()
        self.args = args
        self.model = model
        self.embedding_model = embedding_model
        self.criterion = criterion
        self.optimizer = optimizer
        self.epoch = 0
        self.step_losses = []

    def train(self, dataset):
        self.model.train()
        self.embedding_model.train()
        self.embedding_model.zero_grad()
        self.optimizer.zero_grad()
        loss, k = 0.0, 0
        indices = torch.randperm(len(dataset))
        for idx in tqdm(range(len(dataset)), desc='Training epoch ' + str(self.epoch + 1) + '', disable=True):
            tree, sent, label = dataset[indices[idx]]
            input = Var(sent)
            target = Var(map_label_to_target_sentiment(label, dataset.num_classes, fine_grain=self.args.fine_grain))
            if self.args.cuda:
                input = input.cuda()
                target = target.cuda()
            emb = F.torch.unsqueeze(self.embedding_model(input), 1)
            output, err = self.model.forward(tree, emb, training=True)
            err = err / self.args.batchsize
            loss += err.data[0]
            self.step_losses.append(float(err.data[0]))
            err.backward()
            k += 1
            if k == self.args.batchsize:
                for f in self.embedding_model.parameters():
                    f.data.sub_(f.grad.data * self.args.emblr)
                self.optimizer.step()
                self.embedding_model.zero_grad()
                self.optimizer.zero_grad()
                k = 0
        self.epoch += 1
        return loss / len(dataset)

    def test(self, dataset):
        self.model.eval()
        self.embedding_model.eval()
        loss = 0
        predictions = torch.zeros(len(dataset))
        indices = torch.range(1, dataset.num_classes)
        for idx in tqdm(range(len(dataset)), desc='Testing epoch  ' + str(self.epoch) + '', disable=True):
            tree, sent, label = dataset[idx]
            input = Var(sent, volatile=True)
            target = Var(map_label_to_target_sentiment(label, dataset.num_classes, fine_grain=self.args.fine_grain),
                         volatile=True)
            if self.args.cuda:
                input = input.cuda()
                target = target.cuda()
            emb = F.torch.unsqueeze(self.embedding_model(input), 1)
            output, _ = self.model(tree, emb)  # size(1,5)
            err = self.criterion(output, target)
            loss += err.item()  # (err.data[0] in the original: a 0-d tensor since torch 0.4)
            output[:, 1] = -9999  # no need middle (neutral) value
            val, pred = torch.max(output, 1)
            predictions[idx] = pred.data.cpu()[0]
        return loss / len(dataset), predictions


# ---------------------------------------------------------------- sentiment.py
def main(argv=None):
    global args
    args = parse_args(argv)
    if args.fine_grain:
        args.num_classes = 5  # 0 1 2 3 4
    else:
        args.num_classes = 3  # 0 1 2 (1 neutral)
    args.cuda = args.cuda and torch.cuda.is_available()
    torch.manual_seed(args.seed)
    if args.cuda:
        torch.cuda.manual_seed(args.seed)

    train_dir = os.path.join(args.data, 'train/')
    dev_dir = os.path.join(args.data, 'dev/')
    vocab_file = os.path.join(args.data, 'vocab-cased.txt')  # use vocab-cased
    vocab = Vocab(filename=vocab_file, data=[PAD_WORD, UNK_WORD])

    # (the original caches each split with torch.save(dataset) / torch.load: data loading)
    train_dataset = SSTDataset(train_dir, vocab, args.num_classes, args.fine_grain, args.model_name)
    dev_dataset = SSTDataset(dev_dir, vocab, args.num_classes, args.fine_grain, args.model_name)

    criterion = nn.NLLLoss()
    model = TreeLSTMSentiment(
        args.cuda, vocab.size(),
        args.input_dim, args.mem_dim,
        args.num_classes, args.model_name, criterion, dropout=bool(args.dropout)
    )
    embedding_model = nn.Embedding(vocab.size(), args.input_dim)
    if args.cuda:
        embedding_model = embedding_model.cuda()
        model.cuda(), criterion.cuda()

    if args.optim == 'adam':
        optimizer = optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=args.lr,
                               weight_decay=args.wd)
    elif args.optim == 'adagrad':
        optimizer = optim.Adagrad([
            {'params': model.parameters(), 'lr': args.lr}
        ], lr=args.lr, weight_decay=args.wd)
    metrics = Metrics(args.num_classes)
    n_params = count_param(model)

    # (the original reads GloVe here; words it lacks get normal_(-0.05, 0.05))
    emb = torch.zeros(vocab.size(), args.input_dim)
    for word in vocab.labelToIdx.keys():
        emb[vocab.getIndex(word)] = torch.Tensor(emb[vocab.getIndex(word)].size()).normal_(-0.05, 0.05)

    # plug these into embedding matrix inside model
    embedding_model.state_dict()['weight'].copy_(emb)
    copied = float(torch.abs(embedding_model.weight.data - emb).max())

    if args.dump_init:
        state = {'model.' + k: v.numpy() for k, v in model.state_dict().items()}
        state['embedding.weight'] = embedding_model.weight.data.numpy()
        np.savez(args.dump_init, **state)
    if args.init:
        init = np.load(args.init)
        model.load_state_dict({k[6:]: torch.from_numpy(init[k]) for k in init.files if k.startswith('model.')})
        embedding_model.load_state_dict({'weight': torch.from_numpy(init['embedding.weight'])})

    trainer = SentimentTrainer(args, model, embedding_model, criterion, optimizer)
    history = []
    filename = args.name + '.pth'
    for epoch in range(args.epochs):
        train_loss = trainer.train(train_dataset)
        dev_loss, dev_pred = trainer.test(dev_dataset)
        dev_acc = metrics.sentiment_accuracy_score(dev_pred, dev_dataset.labels)
        print('==> Train loss   : %f \t' % train_loss, end="")
        print('Epoch ', epoch, 'dev percentage ', dev_acc)
        history.append([float(train_loss), float(dev_loss), dev_acc])
        torch.save(model, args.saved + str(epoch) + '_model_' + filename)
        torch.save(embedding_model, args.saved + str(epoch) + '_embedding_' + filename)
        gc.collect()
    model = torch.load(args.saved + str(args.epochs - 1) + '_model_' + filename, weights_only=False)
    return {"losses": trainer.step_losses, "epochs": history, "n_params": n_params,
            "embedding_copied_max_diff": copied, "dev_predictions": dev_pred.tolist()}


if __name__ == "__main__":
    main()
