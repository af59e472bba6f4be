"""Bidirectional LSTM sentiment classifier with packed sequences.

Written in the style of the tutorial series bentrevett/pytorch-sentiment-analysis,
"2 - Recurrent Neural Networks" (and the legacy "2 - Upgraded Sentiment
Analysis"): a ``DataLoader`` with a ``collate_fn`` that calls
``pad_sequence``, an ``nn.LSTM(bidirectional=True, num_layers=2,
dropout=...)`` fed through ``pack_padded_sequence`` / ``pad_packed_sequence``,
the last forward and backward hidden states concatenated, ``model.apply`` of
an ``nn.init`` function, pretrained vectors assigned with
``model.embedding.weight.data = ...`` (legacy: ``.data.copy_`` and rows zeroed
through ``.data[idx]``), Adam, accuracy from ``argmax().eq()`` (legacy:
``torch.round(torch.sigmoid(.))``), ``np.mean`` of per-batch numbers,
``torch.save(model.state_dict())`` of the best model and
``load_state_dict(torch.load(...))``.

``--style new`` is the current notebook (batch first, ``enforce_sorted=False``,
two classes, ``CrossEntropyLoss``); ``--style legacy`` the torchtext-era one
(sequence first, batches sorted by length, one logit, ``BCEWithLogitsLoss``).
Only tokenisation and the GloVe download are replaced (by the sample
treebank's words and ``normal_`` vectors).
"""
import argparse
import collections
import os

import numpy as np
import tqdm

import torch
import torch.nn as nn
import torch.optim as optim


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--style", default="new", choices=["new", "legacy"])
    p.add_argument("--data", required=True, help="folder with rt-polarity.pos / rt-polarity.neg")
    p.add_argument("--out", default=".", help="where the best model is saved")
    p.add_argument("--seed", default=1234, type=int)
    p.add_argument("--batch_size", default=512, type=int)
    p.add_argument("--embedding_dim", default=300, type=int)
    p.add_argument("--hidden_dim", default=300, type=int)
    p.add_argument("--n_layers", default=2, type=int)
    p.add_argument("--dropout_rate", default=0.5, type=float)
    p.add_argument("--n_epochs", default=10, type=int)
    p.add_argument("--lr", default=5e-4, type=float)
    p.add_argument("--init", default=None, help=".npz state_dict to start from (the parity test)")
    p.add_argument("--dump_init", default=None, help="write the initial state_dict here as .npz")
    return p.parse_args(argv)


# ---------------------------------------------------------------- data
def load_split(folder):
    pos = [line.split() for line in open(os.path.join(folder, "rt-polarity.pos")) if line.strip()]
    neg = [line.split() for line in open(os.path.join(folder, "rt-polarity.neg")) if line.strip()]
    examples = [{"tokens": t, "label": 1} for t in pos] + [{"tokens": t, "label": 0} for t in neg]
    return examples


def build_vocab(examples, specials):
    itos = list(specials) + sorted({w for e in examples for w in e["tokens"]})
    return {w: i for i, w in enumerate(itos)}, itos


def numericalize_example(example, vocab, unk_index):
    ids = [vocab.get(t, unk_index) for t in example["tokens"]]
    return {"ids": torch.tensor(ids), "label": torch.tensor(example["label"]),
            "length": torch.tensor(len(ids))}


def get_collate_fn(pad_index):
    def collate_fn(batch):
        batch_ids = [i["ids"] for i in batch]
        batch_ids = nn.utils.rnn.pad_sequence(
            batch_ids, padding_value=pad_index, batch_first=True
        )
        batch_length = [i["length"] for i in batch]
        batch_length = torch.stack(batch_length)
        batch_label = [i["label"] for i in batch]
        batch_label = torch.stack(batch_label)
        batch = {"ids": batch_ids, "length": batch_length, "label": batch_label}
        return batch

    return collate_fn


def get_data_loader(dataset, batch_size, pad_index, shuffle=False):
    collate_fn = get_collate_fn(pad_index)
    data_loader = torch.utils.data.DataLoader(
        dataset=dataset,
        batch_size=batch_size,
        collate_fn=collate_fn,
        shuffle=shuffle,
    )
    return data_loader


def legacy_collate(pad_index):
    """torchtext's BucketIterator(sort_within_batch=True): sequence-first text,
    batches sorted by decreasing length, (text, lengths) and float labels."""
    def collate_fn(batch):
        batch = sorted(batch, key=lambda e: -int(e["length"]))
        text = nn.utils.rnn.pad_sequence([e["ids"] for e in batch], padding_value=pad_index)
        lengths = torch.stack([e["length"] for e in batch])
        label = torch.stack([e["label"] for e in batch]).float()
        return {"text": (text, lengths), "label": label}
    return collate_fn


# ---------------------------------------------------------------- models
class LSTM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, hidden_dim, output_dim, n_layers, bidirectional,
                 dropout_rate, pad_index):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_index)
        self.lstm = nn.LSTM(
            embedding_dim,
            hidden_dim,
            n_layers,
            bidirectional=bidirectional,
            dropout=dropout_rate,
            batch_first=True,
        )
        self.fc = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, ids, length):
        # ids = [batch size, seq len]
        # length = [batch size]
        embedded = self.dropout(self.embedding(ids))
        packed_embedded = nn.utils.rnn.pack_padded_sequence(
            embedded, length, batch_first=True, enforce_sorted=False
        )
        packed_output, (hidden, cell) = self.lstm(packed_embedded)
        # hidden = [n layers * n directions, batch size, hidden dim]
        output, output_length = nn.utils.rnn.pad_packed_sequence(packed_output)
        if self.lstm.bidirectional:
            hidden = self.dropout(torch.cat([hidden[-1], hidden[-2]], dim=-1))
        else:
            hidden = self.dropout(hidden[-1])
        prediction = self.fc(hidden)
        return prediction


class RNN(nn.Module):
    def __init__(self, vocab_size, embedding_dim, hidden_dim, output_dim, n_layers,
                 bidirectional, dropout, pad_idx):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
        self.rnn = nn.LSTM(embedding_dim,
                           hidden_dim,
                           num_layers=n_layers,
                           bidirectional=bidirectional,
                           dropout=dropout)
        self.fc = nn.Linear(hidden_dim * 2, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, text, text_lengths):
        # text = [sent len, batch size]
        embedded = self.dropout(self.embedding(text))
        # lengths need to be on CPU!
        packed_embedded = nn.utils.rnn.pack_padded_sequence(embedded, text_lengths.to('cpu'))
        packed_output, (hidden, cell) = self.rnn(packed_embedded)
        output, output_lengths = nn.utils.rnn.pad_packed_sequence(packed_output)
        # concat the final forward (hidden[-2,:,:]) and backward (hidden[-1,:,:]) hidden layers
        hidden = self.dropout(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
        return self.fc(hidden)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def initialize_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_normal_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LSTM):
        for name, param in m.named_parameters():
            if "bias" in name:
                nn.init.zeros_(param)
            elif "weight" in name:
                nn.init.orthogonal_(param)


# ---------------------------------------------------------------- train / evaluate
def get_accuracy(prediction, label):
    batch_size, _ = prediction.shape
    predicted_classes = prediction.argmax(dim=-1)
    correct_predictions = predicted_classes.eq(label).sum()
    accuracy = correct_predictions / batch_size
    return accuracy


def binary_accuracy(preds, y):
    """accuracy per batch, i.e. if you get 8/10 right, this returns 0.8, NOT 8"""
    rounded_preds = torch.round(torch.sigmoid(preds))
    correct = (rounded_preds == y).float()  # convert into float for division
    acc = correct.sum() / len(correct)
    return acc


def train(dataloader, model, criterion, optimizer, device, step_losses):
    model.train()
    epoch_losses = []
    epoch_accs = []
    for batch in tqdm.tqdm(dataloader, desc="training...", disable=True):
        ids = batch["ids"].to(device)
        length = batch["length"]
        label = batch["label"].to(device)
        prediction = model(ids, length)
        loss = criterion(prediction, label)
        accuracy = get_accuracy(prediction, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_losses.append(loss.item())
        epoch_accs.append(accuracy.item())
        step_losses.append(loss.item())
    return np.mean(epoch_losses), np.mean(epoch_accs)


def evaluate(dataloader, model, criterion, device):
    model.eval()
    epoch_losses = []
    epoch_accs = []
    with torch.no_grad():
        for batch in tqdm.tqdm(dataloader, desc="evaluating...", disable=True):
            ids = batch["ids"].to(device)
            length = batch["length"]
            label = batch["label"].to(device)
            prediction = model(ids, length)
            loss = criterion(prediction, label)
            accuracy = get_accuracy(prediction, label)
            epoch_losses.append(loss.item())
            epoch_accs.append(accuracy.item())
    return np.mean(epoch_losses), np.mean(epoch_accs)


def train_legacy(model, iterator, optimizer, criterion, step_losses):
    epoch_loss = 0
    epoch_acc = 0
    model.train()
    for batch in iterator:
        optimizer.zero_grad()
        text, text_lengths = batch["text"]
        predictions = model(text, text_lengths).squeeze(1)
        loss = criterion(predictions, batch["label"])
        acc = binary_accuracy(predictions, batch["label"])
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        epoch_acc += acc.item()
        step_losses.append(loss.item())
    return epoch_loss / len(iterator), epoch_acc / len(iterator)


def evaluate_legacy(model, iterator, criterion):
    epoch_loss = 0
    epoch_acc = 0
    model.eval()
    with torch.no_grad():
        for batch in iterator:
            text, text_lengths = batch["text"]
            predictions = model(text, text_lengths).squeeze(1)
            loss = criterion(predictions, batch["label"])
            acc = binary_accuracy(predictions, batch["label"])
            epoch_loss += loss.item()
            epoch_acc += acc.item()
    return epoch_loss / len(iterator), epoch_acc / len(iterator)


def predict_sentiment(text, model, vocab, unk_index, device):
    ids = [vocab.get(t, unk_index) for t in text.split()]
    length = torch.LongTensor([len(ids)])
    tensor = torch.LongTensor(ids).unsqueeze(dim=0).to(device)
    prediction = model(tensor, length).squeeze(dim=0)
    probability = torch.softmax(prediction, dim=-1)
    predicted_class = prediction.argmax(dim=-1).item()
    predicted_probability = probability[predicted_class].item()
    return predicted_class, predicted_probability


# ---------------------------------------------------------------- main
def main(argv=None):
    args = parse_args(argv)
    seed = args.seed
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)
    torch.backends.cudnn.deterministic = True

    examples = load_split(args.data)
    special_tokens = ["<unk>", "<pad>"]
    vocab, itos = build_vocab(examples, special_tokens)
    unk_index = vocab["<unk>"]
    pad_index = vocab["<pad>"]
    order = np.random.permutation(len(examples))
    data = [numericalize_example(examples[i], vocab, unk_index) for i in order]
    n_valid = len(data) // 4
    train_data, valid_data = data[n_valid:], data[:n_valid]

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    vocab_size = len(itos)
    step_losses = []
    metrics = collections.defaultdict(list)
    best_valid_loss = float("inf")

    if args.style == "new":
        train_data_loader = get_data_loader(train_data, args.batch_size, pad_index, shuffle=True)
        valid_data_loader = get_data_loader(valid_data, args.batch_size, pad_index)
        model = LSTM(vocab_size, args.embedding_dim, args.hidden_dim, 2, args.n_layers, True,
                     args.dropout_rate, pad_index)
        model.apply(initialize_weights)
        pretrained_embedding = torch.zeros(vocab_size, args.embedding_dim).normal_(0, 1)
        model.embedding.weight.data = pretrained_embedding
        criterion = nn.CrossEntropyLoss()
    else:
        collate = legacy_collate(pad_index)
        train_data_loader = torch.utils.data.DataLoader(train_data, batch_size=args.batch_size, shuffle=True,
                                                        collate_fn=collate)
        valid_data_loader = torch.utils.data.DataLoader(valid_data, batch_size=args.batch_size,
                                                        collate_fn=collate)
        model = RNN(vocab_size, args.embedding_dim, args.hidden_dim, 1, args.n_layers, True,
                    args.dropout_rate, pad_index)
        pretrained_embeddings = torch.Tensor(vocab_size, args.embedding_dim)
        torch.Tensor.normal_(pretrained_embeddings)       # torchtext's unk_init
        model.embedding.weight.data.copy_(pretrained_embeddings)
        model.embedding.weight.data[unk_index] = torch.zeros(args.embedding_dim)
        model.embedding.weight.data[pad_index] = torch.zeros(args.embedding_dim)
        criterion = nn.BCEWithLogitsLoss()
    n_params = count_parameters(model)

    if args.dump_init:
        np.savez(args.dump_init, **{k: v.numpy() for k, v in model.state_dict().items()})
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})

    optimizer = optim.Adam(model.parameters(), lr=args.lr)
    model = model.to(device)
    criterion = criterion.to(device)

    best_path = os.path.join(args.out, "lstm.pt")
    for epoch in range(args.n_epochs):
        if args.style == "new":
            train_loss, train_acc = train(train_data_loader, model, criterion, optimizer, device, step_losses)
            valid_loss, valid_acc = evaluate(valid_data_loader, model, criterion, device)
        else:
            train_loss, train_acc = train_legacy(model, train_data_loader, optimizer, criterion, step_losses)
            valid_loss, valid_acc = evaluate_legacy(model, valid_data_loader, criterion)
        metrics["train_losses"].append(train_loss)
        metrics["train_accs"].append(train_acc)
        metrics["valid_losses"].append(valid_loss)
        metrics["valid_accs"].append(valid_acc)
        if valid_loss < best_valid_loss:
            best_valid_loss = valid_loss
            torch.save(model.state_dict(), best_path)
        print(f"epoch: {epoch}")
        print(f"train_loss: {train_loss:.3f}, train_acc: {train_acc:.3f}")
        print(f"valid_loss: {valid_loss:.3f}, valid_acc: {valid_acc:.3f}")

    model.load_state_dict(torch.load(best_path))
    if args.style == "new":
        valid_loss, valid_acc = evaluate(valid_data_loader, model, criterion, device)
        prediction = predict_sentiment("a very good comedy", model, vocab, unk_index, device)
    else:
        valid_loss, valid_acc = evaluate_legacy(model, valid_data_loader, criterion)
        prediction = None
    return {"losses": step_losses, "metrics": {k: [float(x) for x in v] for k, v in metrics.items()},
            "best_valid": [float(valid_loss), float(valid_acc)], "prediction": prediction, "n_params": n_params}


if __name__ == "__main__":
    main()
