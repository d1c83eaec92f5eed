"""Start training from an exported demo model: the ONNX file's weights back into :class:`Detector`.

The exporter folds each BatchNorm into its convolution (``X.conv.weight`` scaled, ``X.conv.weight_bias``
added), so the ONNX file holds the network's function but not its BatchNorm statistics. They are rebuilt
from data: with each BatchNorm first set to the identity plus the folded bias (the exported function,
exactly), the per-channel mean and variance of every convolution's output are measured on a few batches
of training crops; each BatchNorm then gets those as running statistics, ``weight = sqrt(var + eps)`` and
``bias = mean + folded bias``. In eval mode that is the exported function again, exactly; in train mode
(batch statistics) it is the same function up to the batch's deviation from the measured statistics, so a
fine-tune starts where the shipped model is, not from a broken network.

    python -m tools.model.train --init models/conveyor-640.onnx --minutes 40 --lr 1e-3 --out runs/v12
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from tools.model.yolo_net import Detector


def folded_weights(path: Path) -> dict[str, np.ndarray]:
    """The ONNX file's named initializers (constants the exporter invented, ``val_*`` and such, included)."""
    model = onnx.load(str(path))
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def load_onnx(model: Detector, path: Path, batches: Iterable[torch.Tensor]) -> int:
    """Load ``path``'s weights into ``model`` and rebuild its BatchNorm statistics on ``batches``
    (float tensors N x 3 x H x W in 0..1). Returns the number of images measured. Raises ``ValueError``
    when the file is not this network (a missing or differently shaped weight)."""
    bns, folded_bias = load_folded(model, folded_weights(path), path)
    sums = {n: [torch.zeros(m.num_features, dtype=torch.float64)] * 2 for n, m in bns.items()}
    counts = dict.fromkeys(bns, 0)

    def hook(name: str):  # type: ignore[no-untyped-def]
        def record(_m: torch.nn.Module, inputs: tuple[torch.Tensor, ...], _out: torch.Tensor) -> None:
            z = inputs[0].detach().double().transpose(0, 1).reshape(inputs[0].shape[1], -1)
            s, sq = sums[name]
            sums[name] = [s + z.sum(1), sq + (z * z).sum(1)]
            counts[name] += z.shape[1]

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in bns.items()]
    images = 0
    model.eval()
    try:
        with torch.no_grad():
            for x in batches:
                model(x)
                images += int(x.shape[0])
    finally:
        for h in handles:
            h.remove()
    if not images:
        raise ValueError("no calibration batches")
    with torch.no_grad():
        for name, module in bns.items():
            s, sq = sums[name]
            mean = s / counts[name]
            var = (sq / counts[name] - mean * mean).clamp_min(1e-6)
            _stats(module)[0].copy_(mean.float())
            _stats(module)[1].copy_(var.float())
            module.weight.copy_(torch.sqrt(var + module.eps).float())
            module.bias.copy_(mean.float() + folded_bias[name])
    return images


def load_folded(
    model: Detector, weights: dict[str, np.ndarray], path: Path
) -> tuple[dict[str, torch.nn.BatchNorm2d], dict[str, torch.Tensor]]:
    """Copy the folded weights into ``model``: each convolution its folded kernel, each BatchNorm the
    identity with the folded bias (statistics zero / one, until calibrated). Returns the BatchNorms by
    name and their folded biases. Raises ``ValueError`` on a missing weight."""
    sd = model.state_dict()
    bns: dict[str, torch.nn.BatchNorm2d] = {}
    folded_bias: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        for name, module in model.named_modules():
            if not isinstance(module, torch.nn.BatchNorm2d):
                continue
            prefix = name[: -len(".bn")]
            w, b = weights.get(f"{prefix}.conv.weight"), weights.get(f"{prefix}.conv.weight_bias")
            if w is None or b is None:
                raise ValueError(f"{path}: no folded convolution {prefix}.conv (not a BeltSight demo detector?)")
            _copy(sd, f"{prefix}.conv.weight", w, path)
            folded_bias[name] = torch.from_numpy(b.copy()).float()
            module.weight.fill_(1.0)
            module.bias.copy_(folded_bias[name])
            _stats(module)[0].zero_()
            _stats(module)[1].fill_(1.0 - module.eps)
            bns[name] = module
        for key in sd:
            if ".bn." in key or key.endswith("conv.weight"):
                continue
            if key not in weights:
                raise ValueError(f"{path}: no weight {key} (not a BeltSight demo detector?)")
            _copy(sd, key, weights[key], path)
    return bns, folded_bias


def _stats(bn: torch.nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    """A BatchNorm's running mean and variance (always there: every BatchNorm of the network tracks them)."""
    assert bn.running_mean is not None and bn.running_var is not None
    return bn.running_mean, bn.running_var


def _copy(sd: dict[str, torch.Tensor], key: str, value: np.ndarray, path: Path) -> None:
    if tuple(sd[key].shape) != value.shape:
        raise ValueError(f"{path}: {key} has shape {list(value.shape)}, this network {list(sd[key].shape)}")
    sd[key].copy_(torch.from_numpy(value.copy()))
