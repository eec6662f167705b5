"""Your training, called once per universe by the multiverse workflow.

``train`` is called with the universe's choices by name (the dimensions of config.yaml's
``space``), and with whichever of ``data``, ``seed``, ``device``, ``run_dir``, ``params``
and ``progress`` its signature names. It returns the metrics config.yaml declares.
``load_data`` runs once per study; what it returns reaches every universe as ``data``.
Nothing here imports multiverse: edit freely, keep the names in config.yaml in step.
"""

import torch
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler


def load_data(seed):
    """A stratified 60/20/20 split of scikit-learn's bundled wine data, standardised."""
    X, y = load_wine(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.6, stratify=y, random_state=seed)
    X_val, X_test, y_val, y_test = train_test_split(X_rest, y_rest, train_size=0.5, stratify=y_rest,
                                                    random_state=seed)
    scaler = StandardScaler().fit(X_train)
    return {name: (scaler.transform(X), y) for name, X, y in
            (("train", X_train, y_train), ("val", X_val, y_val), ("test", X_test, y_test))}


def train(optimizer, lr, hidden, data, seed, progress, epochs=20):
    """One universe: an MLP with ``hidden`` units trained by ``optimizer`` at ``lr``."""
    torch.manual_seed(seed)
    X, y = ({k: torch.as_tensor(v[i], dtype=torch.float32 if i == 0 else torch.long) for k, v in data.items()}
            for i in (0, 1))
    model = torch.nn.Sequential(torch.nn.Linear(X["train"].shape[1], hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, int(y["train"].max()) + 1))
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[optimizer](model.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    order = torch.Generator().manual_seed(seed)
    for epoch in range(1, epochs + 1):
        model.train()
        for idx in torch.randperm(len(y["train"]), generator=order).split(16):
            opt.zero_grad()
            loss_fn(model(X["train"][idx]), y["train"][idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            train_loss = loss_fn(model(X["train"]), y["train"]).item()
            accuracy = {split: (model(X[split]).argmax(1) == y[split]).float().mean().item() for split in X}
        progress(epoch=epoch, train_loss=train_loss, val_acc=accuracy["val"])  # one log line per epoch
    if not torch.isfinite(torch.tensor(train_loss)):
        raise FloatingPointError(f"diverged: train loss {train_loss}")  # recorded as this universe's failure
    return {"train_loss": train_loss, "val_acc": accuracy["val"], "test_acc": accuracy["test"]}
