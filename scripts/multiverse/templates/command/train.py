"""A plain torch training script: an MLP on scikit-learn's bundled wine data.

It knows nothing of the multiverse workflow. It takes its choices as command-line
arguments, prints one line per epoch and writes its metrics to the JSON file --out.
"""

import argparse
import json

import torch
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], required=True)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, default=0.0, help="SGD only")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="JSON file of metrics to write")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    X, y = load_wine(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.6, stratify=y, random_state=0)
    X_val, X_te, y_val, y_te = train_test_split(X_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=0)
    scaler = StandardScaler().fit(X_tr)
    t = lambda a, dtype=torch.float32: torch.as_tensor(a, dtype=dtype)  # noqa: E731
    X_tr, X_val, X_te = (t(scaler.transform(a)) for a in (X_tr, X_val, X_te))
    y_tr, y_val, y_te = (t(a, torch.long) for a in (y_tr, y_val, y_te))

    model = torch.nn.Sequential(torch.nn.Linear(13, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 3))
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)
    history = []
    for epoch in range(1, args.epochs + 1):
        model.train()
        for idx in torch.randperm(len(y_tr), generator=gen).split(16):
            opt.zero_grad()
            loss = loss_fn(model(X_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            train_loss = loss_fn(model(X_tr), y_tr).item()
            val_acc = (model(X_val).argmax(1) == y_val).float().mean().item()
        history.append({"epoch": epoch, "train_loss": train_loss, "val_acc": val_acc})
        print(f"epoch {epoch}: train_loss {train_loss:.4f} val_acc {val_acc:.3f}", flush=True)
    with torch.no_grad():
        test_acc = (model(X_te).argmax(1) == y_te).float().mean().item()
    with open(args.out, "w") as fh:
        json.dump({"train_loss": train_loss, "val_acc": val_acc, "test_acc": test_acc, "history": history}, fh)


if __name__ == "__main__":
    main()
