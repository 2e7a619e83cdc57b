"""Keras models for the PS training jobs, on CIFAR-10-shaped input (32x32x3, 10 classes; `mnist`
on MNIST-shaped 28x28x1).

Each architecture is written once, as a function of an `ops` object: `_KerasOps` builds the
Keras model (usable in eager mode and inside `tf.compat.v1` graph mode), `_CountOps` walks the
same code on shapes only and lists every variable with its shape, in creation order. So
`param_bytes` and a PS placement (tfjob.placement) need neither TensorFlow nor any weight,
and cannot drift from the builder (tests/test_psjob.py also compares the two).

Models (`MODELS`, chosen by name; an unknown name raises ValueError listing the valid ones):

- "vgg16": the 13 3x3 convolutions of VGG-16 (64, 64, M, 128, 128, M, 256 x3, M, 512 x3, M,
  512 x3, M; ReLU, no batch norm, as in the original) and the original fully connected head:
  Flatten (1x1x512 on CIFAR) -> Dense 4096 -> Dense 4096 -> Dense 10, no dropout. The 4096-wide
  head is kept because fully connected weights dominate VGG-16's bytes, and one big matrix is
  what makes PS placement uneven; here the 4096x4096 kernel is half of the model.
- "resnet50": bottleneck ResNet, blocks [3, 4, 6, 3] with 64/128/256/512 bottleneck filters
  (outputs x4), batch norm, 1x1 projection shortcut on each stage's first block. CIFAR stem: one
  3x3 convolution of 64 at stride 1 and no max pool (ImageNet's is 7x7 stride 2 + max pool);
  global average pool -> Dense 10.
- "resnet110": He et al.'s CIFAR ResNet, 3 stages x 18 basic blocks with 16/32/64 filters, batch
  norm, 1x1 projection shortcuts where the shape changes (the paper's option A pads with zeros
  instead; the projections add 2,752 parameters), global average pool -> Dense 10.
- "tiny": three convolutions (16, 32 stride 2, 64 stride 2), global average pool, Dense 10
  (the calibration's default CNN); for tests.
- "mnist": the HiPS paper's Table 1 model ("a MNIST model with 1 million parameters"), as
  TensorFlow's classic MNIST CNN on 28x28x1 input: 5x5 convolutions of 32 and 64, each followed
  by a 2x2 max pool, Dense 300, Dense 10 (the tutorial's Dense 1024 narrowed to 300 so the total
  is ~1.0 M). Input data is synthetic, like every model's here: nothing is downloaded.

`width` multiplies every channel count and fully connected width (not the 10 classes): a layer of
c channels gets max(1, round(c * width)). Bytes grow about as width^2.

Sizes at width 1 (float32 bytes of trainable variables; batch-norm moving statistics are not
trainable and not counted):

| model     | parameters | bytes        | paper (Table 2, ImageNet-sized model) |
| --------- | ---------- | ------------ | ------------------------------------- |
| vgg16     | 33,638,218 | 134,552,872  | 528 MB = 138.4 M parameters           |
| resnet50  | 23,520,842 | 94,083,368   | 97 MB = 25.6 M parameters             |
| resnet110 | 1,730,714  | 6,922,856    | (Fig. 1 only, no size given)          |
| tiny      | 24,234     | 96,936       |                                       |
| mnist     | 996,206    | 3,984,824    | HiPS Table 1: "1 million parameters"  |

The paper's "MB" are MiB of float32 parameters of the ImageNet models (224x224 input, 1000
classes): VGG-16 138,357,544 x 4 B = 527.8 MiB, ResNet50 25,557,032 x 4 B = 97.5 MiB. Our CIFAR
builds are smaller because the input is 32x32 and there are 10 classes: VGG-16's first fully
connected layer sees 1x1x512 instead of 7x7x512 (2.1 M instead of 102.8 M weights) and its last
has 10 outputs instead of 1000; ResNet50 loses the 1000-way classifier (2.05 M) and the 7x7 stem.

Experiments scale the network down by a factor (`scale` in the topology YAML: bandwidths are
divided by it); to keep transfer times those of the paper, the model bytes are divided by the same
factor: `width_for_bytes(name, paper_bytes / scale)` gives the width to pass to the job
(e.g. VGG-16's 553.4 MB / 40 = 13.8 MB).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

#: CIFAR-10 shapes (Table 2: the paper trains on CIFAR-10); same as tfjob.calibrate
IMAGE_SHAPE = (32, 32, 3)
#: MNIST shapes (the `mnist` model: HiPS's Table 1)
MNIST_SHAPE = (28, 28, 1)
CLASSES = 10
BYTES_PER_FLOAT32 = 4


#: width search range for width_for_bytes: below MIN_WIDTH every layer already has one channel
MIN_WIDTH = 1e-4
MAX_WIDTH = 1024.0
BISECTION_STEPS = 60


def scaled(channels: int, width: float) -> int:
    """Channel count `channels` multiplied by `width`, rounded half up, at least 1."""
    return max(1, int(channels * width + 0.5))


# ---------------------------------------------------------------- the two ops backends


@dataclass(frozen=True)
class Variable:
    """One variable the model creates, in creation order (what a PS placement walks)."""

    layer: int  # index of the conv / dense / batch-norm call that creates it, in build order
    shape: tuple[int, ...]
    trainable: bool = True

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * BYTES_PER_FLOAT32


def split_sizes(channels: int, pieces: int) -> list[int]:
    """`channels` cut into `pieces` parts as equal as possible, larger parts first."""
    if not 1 <= pieces <= channels:
        raise ValueError(f"cannot cut {channels} channels into {pieces} pieces")
    q, r = divmod(channels, pieces)
    return [q + 1] * r + [q] * (pieces - r)


class _Ops:
    """Numbers the layers that create variables, so a split plan can name them.

    `splits` maps a conv or dense layer's index to a number of pieces: the layer is built as that
    many narrower layers on the same input, their outputs concatenated along channels. That is
    the same function with the same parameter count (kernel and bias cut along the output axis),
    but each piece is its own variable, so a PS placement can spread one huge kernel over several
    PSs (as tf.compat.v1's fixed_size_partitioner does for variables made with get_variable, which
    Keras 3 layers are not). Only the initial values differ: each piece's Glorot range uses its
    own fan-out.
    """

    def __init__(self, splits: dict[int, int] | None = None) -> None:
        self.splits = dict(splits or {})
        self.layer = -1

    def _next_layer(self) -> int:
        self.layer += 1
        return self.layer

    def _pieces(self, layer: int, channels: int) -> list[int]:
        return split_sizes(channels, self.splits.get(layer, 1))


class _CountOps(_Ops):
    """Walks an architecture on shapes (h, w, c) or (units,), recording every variable."""

    def __init__(self, splits: dict[int, int] | None = None) -> None:
        super().__init__(splits)
        self.variables: list[Variable] = []

    @property
    def params(self) -> int:
        """Trainable parameters (batch-norm moving statistics are not trainable)."""
        return sum(math.prod(v.shape) for v in self.variables if v.trainable)

    def input(self, shape: tuple[int, ...] = IMAGE_SHAPE) -> tuple[int, ...]:
        return shape

    def conv(self, x: tuple[int, ...], filters: int, kernel: int, stride: int = 1, bias: bool = True):
        h, w, c = x
        layer = self._next_layer()
        for f in self._pieces(layer, filters):  # Keras builds a layer's kernel, then its bias
            self.variables.append(Variable(layer, (kernel, kernel, c, f)))
            if bias:
                self.variables.append(Variable(layer, (f,)))
        return (math.ceil(h / stride), math.ceil(w / stride), filters)  # padding "same"

    def batch_norm(self, x: tuple[int, ...]) -> tuple[int, ...]:
        layer, c = self._next_layer(), x[-1]
        # gamma and beta; then the moving mean and variance (not trainable), as Keras creates them
        self.variables += [Variable(layer, (c,)), Variable(layer, (c,))]
        self.variables += [Variable(layer, (c,), trainable=False), Variable(layer, (c,), trainable=False)]
        return x

    def relu(self, x: tuple[int, ...]) -> tuple[int, ...]:
        return x

    def add(self, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
        if a != b:
            raise ValueError(f"cannot add shapes {a} and {b}")
        return a

    def max_pool(self, x: tuple[int, ...]) -> tuple[int, ...]:
        h, w, c = x
        return (h // 2, w // 2, c)

    def global_avg_pool(self, x: tuple[int, ...]) -> tuple[int, ...]:
        return (x[-1],)

    def flatten(self, x: tuple[int, ...]) -> tuple[int, ...]:
        return (math.prod(x),)

    def dense(self, x: tuple[int, ...], units: int) -> tuple[int, ...]:
        layer = self._next_layer()
        for u in self._pieces(layer, units):
            self.variables += [Variable(layer, (x[-1], u)), Variable(layer, (u,))]
        return (units,)


class _KerasOps(_Ops):
    """Builds the architecture as a Keras functional model (keras is imported lazily)."""

    def __init__(self, splits: dict[int, int] | None = None) -> None:
        import keras

        super().__init__(splits)
        self.layers = keras.layers
        self.inputs = None

    def _split(self, x: Any, layer: int, channels: int, make: Callable[[int], Any]) -> Any:
        pieces = self._pieces(layer, channels)
        if len(pieces) == 1:
            return make(channels)(x)
        return self.layers.Concatenate(axis=-1)([make(c)(x) for c in pieces])

    def input(self, shape: tuple[int, ...] = IMAGE_SHAPE) -> Any:
        import keras

        self.inputs = keras.Input(shape)
        return self.inputs

    def conv(self, x: Any, filters: int, kernel: int, stride: int = 1, bias: bool = True) -> Any:
        return self._split(
            x,
            self._next_layer(),
            filters,
            lambda f: self.layers.Conv2D(f, kernel, strides=stride, padding="same", use_bias=bias),
        )

    def batch_norm(self, x: Any) -> Any:
        self._next_layer()
        return self.layers.BatchNormalization()(x)

    def relu(self, x: Any) -> Any:
        return self.layers.ReLU()(x)

    def add(self, a: Any, b: Any) -> Any:
        return self.layers.Add()([a, b])

    def max_pool(self, x: Any) -> Any:
        return self.layers.MaxPooling2D(2)(x)

    def global_avg_pool(self, x: Any) -> Any:
        return self.layers.GlobalAveragePooling2D()(x)

    def flatten(self, x: Any) -> Any:
        return self.layers.Flatten()(x)

    def dense(self, x: Any, units: int) -> Any:
        return self._split(x, self._next_layer(), units, self.layers.Dense)


# ---------------------------------------------------------------- architectures

VGG16_CONVS = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG16_FC = (4096, 4096)
RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (bottleneck filters, blocks, stride)
RESNET50_EXPANSION = 4
RESNET110_STAGES = ((16, 18, 1), (32, 18, 2), (64, 18, 2))  # (filters, basic blocks, stride)


def _vgg16(ops: Any, width: float) -> Any:
    x = ops.input()
    for layer in VGG16_CONVS:
        x = ops.max_pool(x) if layer == "M" else ops.relu(ops.conv(x, scaled(layer, width), 3))
    x = ops.flatten(x)
    for units in VGG16_FC:
        x = ops.relu(ops.dense(x, scaled(units, width)))
    return ops.dense(x, CLASSES)


def _conv_bn(ops: Any, x: Any, filters: int, kernel: int, stride: int = 1, relu: bool = True) -> Any:
    x = ops.batch_norm(ops.conv(x, filters, kernel, stride, bias=False))
    return ops.relu(x) if relu else x


def _bottleneck(ops: Any, x: Any, filters: int, stride: int, project: bool) -> Any:
    out = filters * RESNET50_EXPANSION
    shortcut = _conv_bn(ops, x, out, 1, stride, relu=False) if project else x
    y = _conv_bn(ops, x, filters, 1)
    y = _conv_bn(ops, y, filters, 3, stride)
    y = _conv_bn(ops, y, out, 1, relu=False)
    return ops.relu(ops.add(y, shortcut))


def _basic_block(ops: Any, x: Any, filters: int, stride: int, project: bool) -> Any:
    shortcut = _conv_bn(ops, x, filters, 1, stride, relu=False) if project else x
    y = _conv_bn(ops, x, filters, 3, stride)
    y = _conv_bn(ops, y, filters, 3, relu=False)
    return ops.relu(ops.add(y, shortcut))


def _resnet50(ops: Any, width: float) -> Any:
    x = _conv_bn(ops, ops.input(), scaled(64, width), 3)
    for filters, blocks, stride in RESNET50_STAGES:
        for b in range(blocks):
            # every stage's first block changes the channel count (64 -> 256 too): project it
            x = _bottleneck(ops, x, scaled(filters, width), stride if b == 0 else 1, project=b == 0)
    return ops.dense(ops.global_avg_pool(x), CLASSES)


def _resnet110(ops: Any, width: float) -> Any:
    x = _conv_bn(ops, ops.input(), scaled(16, width), 3)
    in_filters = scaled(16, width)
    for filters, blocks, stride in RESNET110_STAGES:
        f = scaled(filters, width)
        for b in range(blocks):
            s = stride if b == 0 else 1
            x = _basic_block(ops, x, f, s, project=s != 1 or in_filters != f)
            in_filters = f
    return ops.dense(ops.global_avg_pool(x), CLASSES)


def _tiny(ops: Any, width: float) -> Any:
    x = ops.relu(ops.conv(ops.input(), scaled(16, width), 3))
    x = ops.relu(ops.conv(x, scaled(32, width), 3, stride=2))
    x = ops.relu(ops.conv(x, scaled(64, width), 3, stride=2))
    return ops.dense(ops.global_avg_pool(x), CLASSES)


MNIST_CONVS = (32, 64)  # 5x5, each followed by a 2x2 max pool
MNIST_FC = 300


def _mnist(ops: Any, width: float) -> Any:
    x = ops.input(MNIST_SHAPE)
    for filters in MNIST_CONVS:
        x = ops.max_pool(ops.relu(ops.conv(x, scaled(filters, width), 5)))
    x = ops.relu(ops.dense(ops.flatten(x), scaled(MNIST_FC, width)))
    return ops.dense(x, CLASSES)


# ---------------------------------------------------------------- registry and sizes


@dataclass(frozen=True)
class ModelBuilder:
    """One architecture: call it with a width to get a keras.Model, or count its parameters."""

    name: str
    architecture: Callable[[Any, float], Any]
    input_shape: tuple[int, ...] = IMAGE_SHAPE  # one sample's shape: what synthetic data must have

    def __call__(self, width: float = 1.0, splits: dict[int, int] | None = None) -> Any:
        """A keras.Model taking (batch, *input_shape) float32 images and giving 10 logits; `splits`
        builds some layers as several pieces (see _Ops)."""
        import keras

        _check_width(width)
        ops = _KerasOps(splits)
        outputs = self.architecture(ops, width)
        return keras.Model(ops.inputs, outputs, name=f"{self.name}_w{width:g}")

    def param_count(self, width: float = 1.0) -> int:
        """Number of trainable parameters at `width`, from shapes only (no TensorFlow)."""
        _check_width(width)
        ops = _CountOps()
        self.architecture(ops, width)
        return ops.params

    def variables(self, width: float = 1.0, splits: dict[int, int] | None = None) -> list[Variable]:
        """Every variable the Keras build creates, in creation order, from shapes only."""
        _check_width(width)
        ops = _CountOps(splits)
        self.architecture(ops, width)
        return ops.variables

    def splittable(self, width: float = 1.0) -> dict[int, int]:
        """Conv and dense layers (index -> output channels): the layers `splits` may cut."""
        _check_width(width)
        ops = _CountOps()
        self.architecture(ops, width)
        return {v.layer: v.shape[-1] for v in ops.variables if len(v.shape) > 1}


MODELS: dict[str, ModelBuilder] = {
    "vgg16": ModelBuilder("vgg16", _vgg16),
    "resnet50": ModelBuilder("resnet50", _resnet50),
    "resnet110": ModelBuilder("resnet110", _resnet110),
    "tiny": ModelBuilder("tiny", _tiny),
    "mnist": ModelBuilder("mnist", _mnist, MNIST_SHAPE),
}


def _check_width(width: float) -> None:
    if not (isinstance(width, int | float) and math.isfinite(width) and width > 0):
        raise ValueError(f"width must be a positive number, got {width!r}")


def get_model(name: str) -> ModelBuilder:
    """The builder registered as `name`; ValueError listing the valid names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(sorted(MODELS))}") from None


def input_shape(name: str) -> tuple[int, ...]:
    """One input sample's shape for model `name` (CIFAR's 32x32x3, MNIST's 28x28x1)."""
    return get_model(name).input_shape


def build_model(name: str, width: float = 1.0, splits: dict[int, int] | None = None) -> Any:
    """keras.Model `name` at `width` (channel multiplier), with layers cut as `splits` says."""
    return get_model(name)(width, splits)


@lru_cache(maxsize=4096)
def param_bytes(name: str, width: float = 1.0) -> int:
    """Bytes of the float32 trainable variables of model `name` at `width` (computed, not built)."""
    return get_model(name).param_count(width) * BYTES_PER_FLOAT32


def width_for_bytes(name: str, target_bytes: float) -> float:
    """Width whose param_bytes(name, width) is closest to `target_bytes`, found by bisection.

    param_bytes is a non-decreasing step function of width (channel counts are rounded), so the
    bisection brackets the step where it crosses the target and returns the closer side. Targets
    below the smallest model (one channel per layer) give MIN_WIDTH.
    """
    if not target_bytes > 0:
        raise ValueError(f"target_bytes must be positive, got {target_bytes!r}")
    lo, hi = MIN_WIDTH, 1.0
    if param_bytes(name, lo) >= target_bytes:
        return lo
    while param_bytes(name, hi) < target_bytes:
        if hi >= MAX_WIDTH:
            raise ValueError(f"{name} needs a width above {MAX_WIDTH:g} for {target_bytes:.4g} bytes")
        hi *= 2
    for _ in range(BISECTION_STEPS):  # invariant: bytes(lo) < target <= bytes(hi)
        mid = (lo + hi) / 2
        if param_bytes(name, mid) < target_bytes:
            lo = mid
        else:
            hi = mid
    return lo if target_bytes - param_bytes(name, lo) < param_bytes(name, hi) - target_bytes else hi
