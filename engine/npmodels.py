"""Parameter Flow's two small models, scaled, in numpy: real gradients whose sparsity is real.

The paper trains LR on a Criteo subset (105M features, CPU MxNet) and MF on MovieLens (16.3M
parameters, CPU Theano). Neither dataset is downloaded here: both models learn from seeded
synthetic data shaped like theirs, which is what makes DVF's cut meaningful (it depends on how
many entries an update touches and how large they are, not on the labels' meaning):

- `LogisticRegression`: sparse binary features, `FIELDS` active per sample (Criteo's 39), drawn
  from a power law over the d features (a few frequent, most rare, as ad features are); labels
  from a hidden weight vector through the logistic. An update touches only the features its
  batch has, so most of it is zero before DVF filters anything.
- `MatrixFactorization`: users and items (4:1) with rank-`RANK` factors; ratings from hidden
  factors plus noise, users and items drawn from power laws (MovieLens's few heavy raters and
  blockbusters). An update touches only the rows of its batch's users and items.

Each worker draws its own data (seed, worker index) once, and walks it in batches of
`batch_size`; every worker starts from the same parameters (seed) and applies the same summed
update, so the replicas stay equal, as PF's workers apply the broadcast U^t. The engine runs them
with `step_decay` (engine.host.Compute): the update handed out is the gradient at the paper's SGD
step eta / sqrt(t) (its convergence analysis, §4), which is what DVF's delta / sqrt(t) is set
against. numpy rather than a framework: the two models are a few lines of linear algebra, and no TF
process (~650 MB) is needed per worker. Why not scikit-learn: its SGD classifiers own their
weights and do not hand out an update per batch for another process to apply.
"""

from __future__ import annotations

import numpy as np

#: LR: active features per sample (Criteo's 39 fields)
FIELDS = 39
#: MF: the factors' rank, and the users' share of the rows (the rest are items)
RANK, USER_SHARE = 16, 0.8
#: batches of data each worker holds (walked in turn)
BATCHES = 4
#: the power law's exponent over features, users and items
ZIPF = 1.1


def _power_law(rng: np.random.Generator, n: int, size: tuple[int, ...] | int) -> np.ndarray:
    """Indices in [0, n) drawn with P(i) ~ (i + 1)^-ZIPF, shuffled so frequent ones are spread out."""
    cdf = np.cumsum(1.0 / np.arange(1, n + 1) ** ZIPF)
    cdf /= cdf[-1]
    perm = np.random.default_rng(12345 + n).permutation(n)  # the same ranking on every worker
    return perm[np.searchsorted(cdf, rng.random(size), side="right").clip(0, n - 1)]


class LogisticRegression:
    """Sparse logistic regression on d = n_params features (see the module docstring)."""

    def __init__(self, n_params: int, batch_size: int, seed: int, index: int, lr: float) -> None:
        self.d = n_params
        self.lr = lr
        truth = np.random.default_rng(seed)  # the hidden model: the same for every worker
        self.w_true = (truth.standard_normal(n_params) * 0.5).astype(np.float32)
        rng = np.random.default_rng([seed, index, 1])
        n = batch_size * BATCHES
        self.x = _power_law(rng, n_params, (n, FIELDS)).astype(np.int64)
        p = 1 / (1 + np.exp(-self.w_true[self.x].sum(axis=1) / np.sqrt(FIELDS)))
        self.y = (rng.random(n) < p).astype(np.float32)
        self.w = np.zeros(n_params, dtype=np.float32)
        self.batch = batch_size
        self.loss: float | None = None

    def gradient(self, iteration: int) -> np.ndarray:
        b = iteration % BATCHES
        x, y = self.x[b * self.batch : (b + 1) * self.batch], self.y[b * self.batch : (b + 1) * self.batch]
        z = self.w[x].sum(axis=1) / np.sqrt(FIELDS)
        p = 1 / (1 + np.exp(-z))
        self.loss = float(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
        r = (p - y) / (len(y) * np.sqrt(FIELDS))
        return np.bincount(x.ravel(), weights=np.repeat(r, FIELDS), minlength=self.d).astype(np.float32)

    def apply(self, total: np.ndarray, workers: int) -> None:
        self.w -= total * (self.lr / workers)


class MatrixFactorization:
    """Rank-RANK matrix factorisation over n_params / RANK rows of users and items."""

    def __init__(self, n_params: int, batch_size: int, seed: int, index: int, lr: float) -> None:
        rows = n_params // RANK
        self.users = max(1, int(rows * USER_SHARE))
        self.items = max(1, rows - self.users)
        self.n = n_params
        self.lr = lr
        truth = np.random.default_rng(seed)
        pu = truth.standard_normal((self.users, 4)).astype(np.float32)
        qi = truth.standard_normal((self.items, 4)).astype(np.float32)
        rng = np.random.default_rng([seed, index, 2])
        n = batch_size * BATCHES
        self.u = _power_law(rng, self.users, n)
        self.i = _power_law(rng, self.items, n)
        self.r = ((pu[self.u] * qi[self.i]).sum(axis=1) + 0.1 * rng.standard_normal(n)).astype(np.float32)
        init = np.random.default_rng(seed + 1)
        self.p = (init.standard_normal((self.users, RANK)) * 0.1).astype(np.float32)
        self.q = (init.standard_normal((self.items, RANK)) * 0.1).astype(np.float32)
        self.batch = batch_size
        self.loss: float | None = None

    def gradient(self, iteration: int) -> np.ndarray:
        b = iteration % BATCHES
        sl = slice(b * self.batch, (b + 1) * self.batch)
        u, i, r = self.u[sl], self.i[sl], self.r[sl]
        e = (self.p[u] * self.q[i]).sum(axis=1) - r
        self.loss = float(np.mean(e**2))
        gp = np.zeros_like(self.p)
        gq = np.zeros_like(self.q)
        np.add.at(gp, u, e[:, None] * self.q[i] / len(r))
        np.add.at(gq, i, e[:, None] * self.p[u] / len(r))
        out = np.zeros(self.n, dtype=np.float32)
        out[: gp.size] = gp.ravel()
        out[gp.size : gp.size + gq.size] = gq.ravel()
        return out

    def apply(self, total: np.ndarray, workers: int) -> None:
        step = total * (self.lr / workers)
        self.p -= step[: self.p.size].reshape(self.p.shape)
        self.q -= step[self.p.size : self.p.size + self.q.size].reshape(self.q.shape)


MODELS = {"lr": LogisticRegression, "mf": MatrixFactorization}
#: each model's eta: its step is eta / sqrt(t) on the summed update / W (the engine's step_decay, the
#: paper's convergence setting); the loss falls over 30 clocks at these on 10 workers of pf-fig9's
#: sizes, and MF at a constant 20 diverged after 9
LEARNING_RATES = {"lr": 5.0, "mf": 20.0}
