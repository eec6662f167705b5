"""An RBF or linear SVM on scikit-learn's bundled breast-cancer data: the illustration
of Bell et al. (2022), "Modeling the Machine Learning Multiverse", as a user's own code.

Nothing here imports multiverse: the workflow calls ``load_data`` once (data.entrypoint)
and ``train`` for every universe (training.entrypoint), passing what they name.
"""

from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def load_data(seed):
    """A stratified 60/20/20 train/validation/test split, seeded by the study."""
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.6, stratify=y, random_state=seed)
    X_val, X_test, y_val, y_test = train_test_split(X_rest, y_rest, train_size=0.5, stratify=y_rest,
                                                    random_state=seed)
    return {"train": (X_train, y_train), "val": (X_val, y_val), "test": (X_test, y_test)}


def train(kernel, C, gamma, data, seed):
    """Fit one universe's SVM (``gamma`` is None for the linear kernel) and score it."""
    model = make_pipeline(StandardScaler(), SVC(kernel=kernel, C=C, gamma=gamma or "scale", random_state=seed))
    model.fit(*data["train"])
    scores = {f"{split}_acc": model.score(*data[split]) for split in ("train", "val", "test")}
    scores["support_share"] = model[-1].n_support_.sum() / len(data["train"][1])
    return scores
