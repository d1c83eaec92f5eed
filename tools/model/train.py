"""Train the BeltSight demo detector on procedurally rendered conveyor scenes and export it to ONNX.

One fully convolutional network is trained on 320x320 crops of virtual letterboxed frames whose model side is
drawn from {416, 640, 800}, so part pixel sizes cover what every exported model size sees (parts 6-20 % of
the model input side, i.e. ~25-160 px); some crops contain the letterbox pad (value 114).  Training data is
generated on the fly by one worker process (seeds < 1_000_000; evaluation uses seeds above that).

    python -m tools.model.train --seed 0 --minutes 35 --out runs/demo
    python -m tools.model.train --seed 1 --minutes 20 --lr 1e-3 --init runs/demo/last.pt --out runs/demo2
    python -m tools.model.train --export-only --ckpt runs/demo/last.pt      # re-export
    python -m tools.model.train --init models/last.pt --extra /var/lib/beltsight/capture --out runs/own

`--extra DIR` (repeatable) mixes YOLO-format datasets (the daemon's `[capture]` directory once
relabelled, or any tool's YOLO export; `tools.model.yolo_dataset`) into the synthetic stream: a share
`--extra-share` of the crops comes from them (docs/models/improving.md).

Exports models/conveyor-{416,640,800}.onnx (same weights) and models/conveyor-parity.npz.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from tools.kit.synth.parts import NAMES, SIZE_RANGE
from tools.kit.synth.scene import render_scene
from tools.model import onnx_init, yolo_dataset
from tools.model.yolo_net import Detector, DetLoss

MODEL_SIZES = (416, 640, 800)
PAD = 114
VERSION = "1.2.0"


# ----------------------------------------------------------------------------------------------- data
def make_sample(seed: int, imgsz: int, small_share: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """One training crop: (uint8 HxWx3, labels [n, 5] = cls, x1, y1, x2, y2)."""
    rng = np.random.default_rng([seed, 99])
    ref = float(rng.choice(MODEL_SIZES)) * rng.uniform(0.9, 1.1)
    size_range, margin = SIZE_RANGE, 0.3
    mode = rng.random()
    if mode < small_share:  # small and thin parts as the 416 input sees them (a 640 x 480 camera's screw: ~27 x 8 px)
        ref = MODEL_SIZES[0] * rng.uniform(0.72, 1.0)
        size_range = (0.045, 0.12)
    elif mode < small_share + 0.25:  # parts cut by the frame's edges (centres up to 0.5 lengths outside)
        margin = 0.5
    wear = float(rng.uniform(0.5, 2.0)) if rng.random() < 0.6 else 0.0  # belt wear as hard negatives
    w = h = imgsz
    pad_side = None
    if rng.random() < (0.5 if margin > 0.3 else 0.3):  # crop touching the letterbox pad
        pad_side = int(rng.integers(0, 4))
        cut = int(rng.uniform(0.15, 0.6) * imgsz)
        if pad_side < 2:
            h = imgsz - cut
        else:
            w = imgsz - cut
    img, labels = render_scene(
        seed, w, h, ref=ref, density=float(rng.uniform(0.08, 0.3)), size_range=size_range, margin=margin, wear=wear
    )
    lab = np.array([[d["cls"], *d["box"]] for d in labels], dtype=np.float32).reshape(-1, 5)
    if pad_side is not None:
        canvas = np.full((imgsz, imgsz, 3), PAD, dtype=np.uint8)
        dx = imgsz - w if pad_side == 3 else 0
        dy = imgsz - h if pad_side == 1 else 0
        canvas[dy : dy + h, dx : dx + w] = img
        img = canvas
        lab[:, [1, 3]] += dx
        lab[:, [2, 4]] += dy
    return img, lab


def flip(img: np.ndarray, lab: np.ndarray, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """Mirror a crop and its pixel-edge xyxy boxes: mode 1 = left-right, 2 = up-down, 3 = both."""
    h, w = img.shape[:2]
    lab = lab.copy()
    if mode & 1:
        img = img[:, ::-1]
        lab[:, [1, 3]] = w - lab[:, [3, 1]]
    if mode & 2:
        img = img[::-1]
        lab[:, [2, 4]] = h - lab[:, [4, 2]]
    return np.ascontiguousarray(img), lab


class SynthStream(torch.utils.data.IterableDataset):
    """Endless stream of rendered crops. Rendering costs about half as much CPU as a training step,
    so each render is used twice: once as rendered and once mirrored (a random flip), the mirrored
    copy drawn later from a pool of `pool` renders so that the two copies land in different batches."""

    def __init__(
        self,
        seed: int,
        imgsz: int,
        start: int = 0,
        reuse: bool = True,
        pool: int = 48,
        extra: list[yolo_dataset.Sample] | None = None,
        extra_share: float = 0.0,
        small_share: float = 0.25,
    ) -> None:
        super().__init__()
        self.small_share = small_share
        self.seed, self.imgsz, self.start, self.reuse, self.pool = seed, imgsz, start, reuse, pool
        self.extra, self.extra_share = extra or [], extra_share

    def __iter__(self):  # type: ignore[no-untyped-def]
        i = self.start
        rng = np.random.default_rng([self.seed, 4242])
        pool: list[tuple[np.ndarray, np.ndarray]] = []
        while True:
            s = (self.seed * 7_919_993 + i) % 1_000_000  # training seeds stay below 1_000_000
            if self.extra and rng.random() < self.extra_share:  # a captured (relabelled) frame
                img, lab = yolo_dataset.crop(self.extra[int(rng.integers(0, len(self.extra)))], self.imgsz, rng)
            else:
                img, lab = make_sample(s, self.imgsz, self.small_share)
            yield torch.from_numpy(np.array(img)).permute(2, 0, 1), torch.from_numpy(lab)
            i += 1
            if not self.reuse:
                continue
            pool.append((img, lab))
            if len(pool) >= self.pool:
                img2, lab2 = flip(*pool.pop(int(rng.integers(0, len(pool)))), int(rng.integers(1, 4)))
                yield torch.from_numpy(img2).permute(2, 0, 1), torch.from_numpy(lab2)


def collate(batch):  # type: ignore[no-untyped-def]
    imgs = torch.stack([b[0] for b in batch])
    tg = []
    for k, (_, lab) in enumerate(batch):
        if len(lab):
            tg.append(torch.cat([torch.full((len(lab), 1), float(k)), lab], 1))
    targets = torch.cat(tg) if tg else torch.zeros(0, 6)
    return imgs, targets


# ----------------------------------------------------------------------------------------------- export
def export_all(model: Detector, out_dir: Path, seed: int = 0) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    m = copy.deepcopy(model).float().eval()
    m.export = True
    for s in MODEL_SIZES:
        path = out_dir / f"conveyor-{s}.onnx"
        x = torch.zeros(2, 3, s, s)
        batch = torch.export.Dim("batch", min=1, max=64)
        torch.onnx.export(
            m,
            (x,),
            str(path),
            input_names=["images"],
            output_names=["output0"],
            opset_version=18,
            dynamo=True,
            dynamic_shapes={"x": {0: batch}},
            external_data=False,
        )
        om = onnx.load(str(path))
        for v in list(om.graph.input) + list(om.graph.output):
            d0 = v.type.tensor_type.shape.dim[0]
            d0.ClearField("dim_value")
            d0.dim_param = "batch"
        meta = {
            "names": json.dumps(NAMES),
            "layout": "yolov8",
            "imgsz": json.dumps([s, s]),
            "strides": json.dumps([8, 16, 32]),
            "version": VERSION,
            "task": "detect",
            "pad_value": str(PAD),
            "description": "BeltSight demo detector for SYNTHETIC conveyor scenes (bolt, hex_nut, washer, "
            "l_bracket); trained on procedurally rendered images, not for real factories.",
        }
        del om.metadata_props[:]
        for k, v in meta.items():
            p = om.metadata_props.add()
            p.key, p.value = k, v
        onnx.checker.check_model(om)
        onnx.save(om, str(path))
        print(f"exported {path} ({path.stat().st_size / 1e6:.1f} MB)", flush=True)
    rng = np.random.default_rng(seed + 2024)
    x = rng.random((2, 3, 416, 416), dtype=np.float32)
    with torch.no_grad():
        y = m(torch.from_numpy(x)).numpy()
    np.savez_compressed(out_dir / "conveyor-parity.npz", input=x, output=y, imgsz=np.array(416))
    print(f"wrote {out_dir / 'conveyor-parity.npz'}", flush=True)


# ----------------------------------------------------------------------------------------------- train
class EMA:
    def __init__(self, model: torch.nn.Module, decay: float = 0.9995, tau: float = 300.0) -> None:
        self.ema = copy.deepcopy(model).eval()
        for p in self.ema.parameters():
            p.requires_grad_(False)
        self.decay, self.tau, self.updates = decay, tau, 0

    def update(self, model: torch.nn.Module) -> None:
        with torch.no_grad():
            self.updates += 1
            d = self.decay * (1 - math.exp(-self.updates / self.tau))
            msd = model.state_dict()
            for k, v in self.ema.state_dict().items():
                if v.dtype.is_floating_point:
                    v.mul_(d).add_(msd[k].detach(), alpha=1 - d)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0, help="total optimizer steps (0: derive from --minutes)")
    ap.add_argument("--minutes", type=float, default=33.0, help="wall-time budget used when --steps is 0")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--imgsz", type=int, default=320)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (only faster on CPUs with bf16 units)")
    ap.add_argument("--out", type=Path, default=Path("runs/demo"))
    ap.add_argument("--models", type=Path, default=Path("models"))
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--no-reuse", action="store_true", help="render every training crop afresh (no mirrored reuse)")
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--ckpt", type=Path)
    ap.add_argument(
        "--init", type=Path, help="start from a checkpoint's EMA weights, or from an exported models/conveyor-*.onnx"
    )
    ap.add_argument("--extra", type=Path, action="append", default=[], help="a YOLO-format dataset dir (repeatable)")
    ap.add_argument("--extra-share", type=float, default=0.3, help="share of training crops from --extra datasets")
    ap.add_argument(
        "--small-share",
        type=float,
        default=0.25,
        help="share of crops with small, thin parts as the 416 input sees them",
    )
    return ap.parse_args()


def initialise(model: Detector, args: argparse.Namespace) -> None:
    """Load --init into `model`: a shipped .onnx (weights folded, BatchNorm rebuilt on data) or a checkpoint's EMA."""
    if args.init and args.init.suffix == ".onnx":  # a shipped model: weights folded, BatchNorm rebuilt on data
        calib = SynthStream(args.seed + 1, args.imgsz, start=500_000, reuse=False)
        crops = (img for img, _ in calib)
        batches = (torch.stack([next(crops) for _ in range(args.batch)]).float() / 255.0 for _ in range(24))
        n = onnx_init.load_onnx(model, args.init, batches)
        print(f"initialised from {args.init} (BatchNorm statistics from {n} crops)", flush=True)
    elif args.init:
        model.load_state_dict(torch.load(args.init, map_location="cpu")["ema"])
        print(f"initialised from {args.init}", flush=True)


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay on the weight matrices and kernels only (not on biases and norms)."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for p in model.parameters():
        (decay if p.ndim > 1 else no_decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.999),
    )


def make_loader(args: argparse.Namespace) -> torch.utils.data.DataLoader[Any]:
    """The training stream: synthetic crops, with a share from the --extra datasets."""
    extra = [sample for root in args.extra for sample in yolo_dataset.load(root, NAMES)]
    if args.extra:
        print(f"extra: {len(extra)} labelled images from {len(args.extra)} dataset(s)", flush=True)
    stream = SynthStream(
        args.seed,
        args.imgsz,
        reuse=not args.no_reuse,
        extra=extra,
        extra_share=args.extra_share,
        small_share=args.small_share,
    )
    return torch.utils.data.DataLoader(
        stream, batch_size=args.batch, num_workers=1, collate_fn=collate, prefetch_factor=4, persistent_workers=True
    )


def learning_rate(base: float, step: int, prog: float, warm: int = 100) -> float:
    """Linear warm-up over `warm` steps, then cosine decay to 2 % of `base` as progress goes to 1."""
    if step < warm:
        return base * (step + 1) / warm
    return base * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * prog)))


def train(model: Detector, args: argparse.Namespace) -> tuple[EMA, int, float]:
    """The training loop: until --steps (exactly reproducible) or the --minutes budget is spent; checkpoints
    the EMA weights to --out/last.pt every 250 steps. Returns (the EMA, steps taken, start time)."""
    opt = make_optimizer(model, args.lr)
    ema = EMA(model)
    crit = DetLoss(model)
    dl = make_loader(args)
    total = args.steps
    t0 = time.time()
    t_mark, n_mark = t0, 0
    run_loss = np.zeros(3)
    step = 0
    for imgs, targets in dl:
        elapsed = time.time() - t0
        # progress in [0, 1]: by steps when --steps is given (exactly reproducible), else by wall-clock budget
        prog = step / total if total else elapsed / (args.minutes * 60)
        if prog >= 1.0:
            break
        lr = learning_rate(args.lr, step, prog)
        for g in opt.param_groups:
            g["lr"] = lr
        x = (imgs.float() / 255.0).contiguous(memory_format=torch.channels_last)
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            outs = model(x)
        loss, items = crit(outs, targets, (args.imgsz, args.imgsz))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        ema.update(model)
        run_loss = 0.9 * run_loss + 0.1 * items.numpy() if step else items.numpy()
        step += 1
        if step % args.log_every == 0 or step == total:
            now = time.time()
            ips = (step - n_mark) * args.batch / max(now - t_mark, 1e-6)
            t_mark, n_mark = now, step
            log_progress(step, prog, lr, run_loss, ips, now - t0, args.batch)
        if step % 250 == 0:
            torch.save({"ema": ema.ema.state_dict(), "step": step}, args.out / "last.pt")
    return ema, step, t0


def log_progress(step: int, prog: float, lr: float, run_loss: np.ndarray, ips: float, el: float, batch: int) -> None:
    eta = el / max(prog, 1e-6) - el
    print(
        f"step {step} ({prog * 100:.0f}%) imgs {step * batch} lr {lr:.2e} box {run_loss[0]:.3f} "
        f"cls {run_loss[1]:.3f} dfl {run_loss[2]:.3f} {ips:.1f} img/s elapsed {el / 60:.1f} min "
        f"ETA {eta / 60:.1f} min",
        flush=True,
    )


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = Detector(nc=len(NAMES))
    if args.export_only:
        sd = torch.load(args.ckpt or args.out / "last.pt", map_location="cpu")
        model.load_state_dict(sd["ema"])
        export_all(model, args.models, args.seed)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    initialise(model, args)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"params {nparams / 1e6:.2f} M  seed {args.seed}  batch {args.batch}  imgsz {args.imgsz}", flush=True)
    model = model.to(memory_format=torch.channels_last)
    ema, step, t0 = train(model, args)
    torch.save({"ema": ema.ema.state_dict(), "step": step}, args.out / "last.pt")
    print(f"training done: {step} steps in {(time.time() - t0) / 60:.1f} min", flush=True)
    export_all(ema.ema, args.models, args.seed)
    print(f"total wall time {(time.time() - t0) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
