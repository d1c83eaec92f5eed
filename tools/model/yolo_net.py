"""Small YOLOv8-style anchor-free detector (C2f backbone, SPPF, PAN neck, decoupled heads, DFL).

Exported/eval forward returns ONE tensor ``[batch, 4 + nc, A]``: rows 0..3 = cx, cy, w, h in input pixels,
rows 4.. = class scores after sigmoid (no objectness); anchors ordered stride 8 (row-major), 16, 32.
Training forward returns the raw per-level maps.  Loss: task-aligned assigner, CIoU + DFL + BCE.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

STRIDES = (8, 16, 32)


class Conv(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c: int, shortcut: bool = True) -> None:
        super().__init__()
        self.cv1 = Conv(c, c, 3)
        self.cv2 = Conv(c, c, 3)
        self.add = shortcut

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = False) -> None:
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, shortcut) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y0 = self.cv1(x)
        ys = [y0[:, : self.c], y0[:, self.c :]]  # slicing, not chunk
        for m in self.m:
            ys.append(m(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class SPPF(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 5) -> None:
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))


class Detector(nn.Module):
    def __init__(self, nc: int = 4, width: tuple[int, ...] = (16, 32, 64, 96, 144), reg_max: int = 8) -> None:
        super().__init__()
        w0, w1, w2, w3, w4 = width
        self.nc, self.reg_max = nc, reg_max
        self.stem = Conv(3, w0, 3, 2)
        self.b1 = nn.Sequential(Conv(w0, w1, 3, 2), C2f(w1, w1, 1, True))
        self.b2 = nn.Sequential(Conv(w1, w2, 3, 2), C2f(w2, w2, 2, True))
        self.b3 = nn.Sequential(Conv(w2, w3, 3, 2), C2f(w3, w3, 2, True))
        self.b4 = nn.Sequential(Conv(w3, w4, 3, 2), C2f(w4, w4, 1, True), SPPF(w4, w4))
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.n4 = C2f(w4 + w3, w3, 1)
        self.n3 = C2f(w3 + w2, w2, 1)
        self.d3 = Conv(w2, w2, 3, 2)
        self.o4 = C2f(w2 + w3, w3, 1)
        self.d4 = Conv(w3, w3, 3, 2)
        self.o5 = C2f(w3 + w4, w4, 1)
        chs = (w2, w3, w4)
        c2 = max(16, chs[0] // 4, 4 * reg_max)
        c3 = max(chs[0], min(nc, 100))
        self.box = nn.ModuleList(
            nn.Sequential(Conv(c, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * reg_max, 1)) for c in chs
        )
        self.cls = nn.ModuleList(nn.Sequential(Conv(c, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, nc, 1)) for c in chs)
        self.register_buffer("proj", torch.arange(reg_max, dtype=torch.float32), persistent=False)
        self.export = False
        self._bias_init()

    def _bias_init(self) -> None:
        for b, c, s in zip(self.box, self.cls, STRIDES, strict=True):
            nn.init.constant_(b[-1].bias, 1.0)
            nn.init.constant_(c[-1].bias, math.log(5 / self.nc / (640 / s) ** 2))

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.b1(self.stem(x))
        p3 = self.b2(x)
        p4 = self.b3(p3)
        p5 = self.b4(p4)
        n4 = self.n4(torch.cat([self.up(p5), p4], 1))
        n3 = self.n3(torch.cat([self.up(n4), p3], 1))
        o4 = self.o4(torch.cat([self.d3(n3), n4], 1))
        o5 = self.o5(torch.cat([self.d4(o4), p5], 1))
        return [n3, o4, o5]

    def forward(self, x: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        feats = self.features(x)
        outs = [torch.cat([b(f), c(f)], 1) for f, b, c in zip(feats, self.box, self.cls, strict=True)]
        if self.training and not self.export:
            return outs
        return self.decode(outs, x.shape[2], x.shape[3])

    def decode(self, outs: list[torch.Tensor], h: int, w: int) -> torch.Tensor:
        """Raw level maps -> [B, 4 + nc, A] (cx, cy, w, h px; sigmoid scores)."""
        flat = torch.cat([o.flatten(2) for o in outs], 2)
        anchors, strides = make_anchors([(h // s, w // s) for s in STRIDES], flat.device)
        box = flat[:, : 4 * self.reg_max]
        cls = flat[:, 4 * self.reg_max :]
        dist = box.unflatten(1, (4, self.reg_max)).softmax(2)
        dist = (dist * self.proj.reshape(1, 1, -1, 1)).sum(2)  # [B, 4, A] ltrb in grid units
        lt = dist[:, 0:2]
        rb = dist[:, 2:4]
        anc = anchors.transpose(0, 1).unsqueeze(0)  # [1, 2, A]
        st = strides.transpose(0, 1).unsqueeze(0)  # [1, 1, A]
        xy = (anc + (rb - lt) / 2) * st
        wh = (lt + rb) * st
        return torch.cat([xy, wh, cls.sigmoid()], 1)


def make_anchors(
    shapes: list[tuple[int, int]], device: torch.device, offset: float = 0.5
) -> tuple[torch.Tensor, torch.Tensor]:
    """Anchor centres in grid units [A, 2] (x, y) and stride [A, 1], stride-8 grid first, row-major."""
    pts, sts = [], []
    for (h, w), s in zip(shapes, STRIDES, strict=True):
        sy, sx = torch.meshgrid(
            torch.arange(h, device=device, dtype=torch.float32) + offset,
            torch.arange(w, device=device, dtype=torch.float32) + offset,
            indexing="ij",
        )
        pts.append(torch.stack([sx, sy], -1).reshape(-1, 2))
        sts.append(torch.full((h * w, 1), float(s), device=device))
    return torch.cat(pts), torch.cat(sts)


# ----------------------------------------------------------------------------------------------- loss
def bbox_ciou(b1: torch.Tensor, b2: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """CIoU of xyxy boxes (broadcasting, last dim 4)."""
    b1x1, b1y1, b1x2, b1y2 = b1.unbind(-1)
    b2x1, b2y1, b2x2, b2y2 = b2.unbind(-1)
    w1, h1 = b1x2 - b1x1, b1y2 - b1y1 + eps
    w2, h2 = b2x2 - b2x1, b2y2 - b2y1 + eps
    inter = (torch.min(b1x2, b2x2) - torch.max(b1x1, b2x1)).clamp(0) * (
        torch.min(b1y2, b2y2) - torch.max(b1y1, b2y1)
    ).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1x2, b2x2) - torch.min(b1x1, b2x1)
    ch = torch.max(b1y2, b2y2) - torch.min(b1y1, b2y1)
    c2 = cw**2 + ch**2 + eps
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
    v = (4 / math.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


def box_iou_pair(b1: torch.Tensor, b2: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    inter = (torch.min(b1[..., 2], b2[..., 2]) - torch.max(b1[..., 0], b2[..., 0])).clamp(0) * (
        torch.min(b1[..., 3], b2[..., 3]) - torch.max(b1[..., 1], b2[..., 1])
    ).clamp(0)
    a1 = (b1[..., 2] - b1[..., 0]) * (b1[..., 3] - b1[..., 1])
    a2 = (b2[..., 2] - b2[..., 0]) * (b2[..., 3] - b2[..., 1])
    return inter / (a1 + a2 - inter + eps)


def tal_assign(
    pd_scores: torch.Tensor,
    pd_boxes: torch.Tensor,
    anc: torch.Tensor,
    gt_cls: torch.Tensor,
    gt_boxes: torch.Tensor,
    mask_gt: torch.Tensor,
    topk: int = 10,
    alpha: float = 0.5,
    beta: float = 6.0,
    eps: float = 1e-9,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Task-aligned assigner. pd_scores [B,A,C] (sigmoid), pd_boxes [B,A,4] xyxy px, anc [A,2] px,
    gt_cls [B,M] long, gt_boxes [B,M,4], mask_gt [B,M] bool.
    Returns target_boxes [B,A,4], target_scores [B,A,C], fg_mask [B,A] bool, target_gt_idx [B,A]."""
    with torch.no_grad():
        bsz, na, nc = pd_scores.shape
        m = gt_boxes.shape[1]
        if m == 0:
            return (
                torch.zeros_like(pd_boxes),
                torch.zeros_like(pd_scores),
                torch.zeros(bsz, na, dtype=torch.bool),
                torch.zeros(bsz, na, dtype=torch.long),
            )
        # anchors inside gt
        lt = anc[None, None] - gt_boxes[:, :, None, :2]
        rb = gt_boxes[:, :, None, 2:] - anc[None, None]
        in_gts = (torch.cat([lt, rb], -1).amin(-1) > eps) & mask_gt[..., None]  # [B,M,A]
        ious = box_iou_pair(gt_boxes[:, :, None, :], pd_boxes[:, None, :, :]).clamp(0)  # [B,M,A]
        idx = gt_cls.clamp(0)[..., None].expand(-1, -1, na)
        sc = torch.gather(pd_scores.transpose(1, 2), 1, idx)  # [B,M,A]
        align = sc.pow(alpha) * ious.pow(beta) * in_gts
        k = min(topk, na)
        top_v, top_i = align.topk(k, dim=-1)
        is_topk = torch.zeros_like(align, dtype=torch.bool).scatter_(-1, top_i, top_v > eps)
        mask_pos = is_topk & in_gts & mask_gt[..., None]
        # resolve anchors assigned to several gts: keep highest IoU
        fg_cnt = mask_pos.sum(1)  # [B,A]
        if (fg_cnt > 1).any():
            best = ious.argmax(1)  # [B,A]
            best_onehot = F.one_hot(best, m).permute(0, 2, 1).bool()
            mask_pos = torch.where((fg_cnt > 1)[:, None, :], best_onehot, mask_pos)
        fg = mask_pos.any(1)
        tgt_idx = mask_pos.float().argmax(1)  # [B,A]
        bidx = torch.arange(bsz)[:, None]
        t_boxes = gt_boxes[bidx, tgt_idx]
        t_cls = gt_cls[bidx, tgt_idx].clamp(0)
        t_scores = F.one_hot(t_cls, nc).float() * fg[..., None]
        align = align * mask_pos
        pos_align = align.amax(-1, keepdim=True)  # [B,M,1]
        pos_iou = (ious * mask_pos).amax(-1, keepdim=True)
        norm = (align * pos_iou / (pos_align + eps)).amax(1)  # [B,A]
        t_scores = t_scores * norm[..., None]
        return t_boxes, t_scores, fg, tgt_idx


class DetLoss:
    def __init__(self, model: Detector, box_w: float = 7.5, cls_w: float = 0.5, dfl_w: float = 1.5) -> None:
        self.nc, self.reg_max = model.nc, model.reg_max
        self.box_w, self.cls_w, self.dfl_w = box_w, cls_w, dfl_w
        self.proj = torch.arange(self.reg_max, dtype=torch.float32)

    def __call__(
        self, outs: list[torch.Tensor], targets: torch.Tensor, img_hw: tuple[int, int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """outs: raw level maps; targets [N, 6] = (batch_idx, cls, x1, y1, x2, y2) in px."""
        outs = [o.float() for o in outs]
        bsz = outs[0].shape[0]
        flat = torch.cat([o.reshape(bsz, 4 * self.reg_max + self.nc, -1) for o in outs], 2).transpose(1, 2)
        pd_dist, pd_cls = flat[..., : 4 * self.reg_max], flat[..., 4 * self.reg_max :]
        h, w = img_hw
        anc, st = make_anchors([(h // s, w // s) for s in STRIDES], flat.device)
        na = anc.shape[0]
        # targets -> padded [B, M, ...]
        counts = torch.bincount(targets[:, 0].long(), minlength=bsz) if len(targets) else torch.zeros(bsz)
        m = int(counts.max().item()) if len(targets) else 0
        gt_cls = torch.full((bsz, m), -1, dtype=torch.long)
        gt_boxes = torch.zeros(bsz, m, 4)
        for b in range(bsz):
            t = targets[targets[:, 0] == b]
            gt_cls[b, : len(t)] = t[:, 1].long()
            gt_boxes[b, : len(t)] = t[:, 2:6]
        mask_gt = gt_cls >= 0
        dist = pd_dist.reshape(bsz, na, 4, self.reg_max).softmax(-1) @ self.proj  # [B,A,4] grid units
        anc_px = anc * st
        pd_boxes = torch.cat([anc - dist[..., :2], anc + dist[..., 2:]], -1) * st  # xyxy px
        t_boxes, t_scores, fg, _ = tal_assign(
            pd_cls.detach().sigmoid(), pd_boxes.detach(), anc_px, gt_cls, gt_boxes, mask_gt
        )
        ts_sum = max(float(t_scores.sum()), 1.0)
        loss_cls = F.binary_cross_entropy_with_logits(pd_cls, t_scores, reduction="sum") / ts_sum
        loss_box = torch.zeros(())
        loss_dfl = torch.zeros(())
        if fg.any():
            wgt = t_scores.sum(-1)[fg][:, None]
            iou = bbox_ciou(pd_boxes[fg], t_boxes[fg])
            loss_box = ((1.0 - iou)[:, None] * wgt).sum() / ts_sum
            # DFL on distances in grid units
            stf = st.expand(bsz, na, 1)[fg]
            ancf = anc.expand(bsz, na, 2)[fg]
            tb = t_boxes[fg] / stf
            tgt = torch.cat([ancf - tb[:, :2], tb[:, 2:] - ancf], -1).clamp(0, self.reg_max - 1 - 0.01)
            tl = tgt.long()
            wl = tl + 1 - tgt
            pdf = pd_dist[fg].reshape(-1, self.reg_max)
            tl_f, wl_f = tl.reshape(-1), wl.reshape(-1)
            dfl = (
                (
                    F.cross_entropy(pdf, tl_f, reduction="none") * wl_f
                    + F.cross_entropy(pdf, tl_f + 1, reduction="none") * (1 - wl_f)
                )
                .reshape(-1, 4)
                .mean(-1)
            )
            loss_dfl = (dfl[:, None] * wgt).sum() / ts_sum
        total = (self.box_w * loss_box + self.cls_w * loss_cls + self.dfl_w * loss_dfl) * bsz
        return total, torch.stack([loss_box, loss_cls, loss_dfl]).detach()
