"""Tiny torch networks for the demo models and the YOLOv8-style detector loss (dev tooling only).

The detector is anchor-free like YOLOv8: per level a DFL box branch (4 x REG_MAX bins) and a class
branch. ``export=True`` switches ``forward`` to the exact tail an Ultralytics export has (DFL softmax
+ 1x1 conv with arange weights -> dist2bbox with anchors -> * strides -> sigmoid -> Concat), so every
YOLOv8 consumer can read our output ``[1, 4 + nc, N]`` unchanged.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

REG_MAX = 8
STRIDES = (8, 16, 32)


class ConvBN(nn.Sequential):  # type: ignore[misc]  # torch is untyped under the project's mypy config
    """Conv-BN-SiLU, the YOLOv8 ``Conv`` block (BN folded into the conv before export)."""

    def __init__(self, cin: int, cout: int, k: int = 3, s: int = 1, act: bool = True) -> None:
        super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout))
        if act:
            self.append(nn.SiLU())


class Res(nn.Module):  # type: ignore[misc]  # torch is untyped under the project's mypy config
    """Two 3x3 convs with a skip: cheap depth at constant resolution."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.a = ConvBN(c, c)
        self.b = ConvBN(c, c)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.b(self.a(x))


class DFL(nn.Module):  # type: ignore[misc]  # torch is untyped under the project's mypy config
    """Expected value of the softmax over REG_MAX bins as a frozen 1x1 conv (Ultralytics layout)."""

    def __init__(self, bins: int = REG_MAX) -> None:
        super().__init__()
        self.bins = bins
        self.conv = nn.Conv2d(bins, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(bins, dtype=torch.float32).view(1, bins, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        b, _, a = x.shape
        return self.conv(x.view(b, 4, self.bins, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(sizes: list[tuple[int, int]], strides: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Anchor centres in grid units (i + 0.5) [N, 2] and per-anchor stride [N, 1], level order."""
    points, stride_t = [], []
    for (h, w), s in zip(sizes, strides):
        sy, sx = torch.meshgrid(torch.arange(h) + 0.5, torch.arange(w) + 0.5, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_t.append(torch.full((h * w, 1), float(s)))
    return torch.cat(points), torch.cat(stride_t)


class TinyDet(nn.Module):  # type: ignore[misc]  # torch is untyped under the project's mypy config
    """~0.3 M parameter detector, strides 8/16/32, a small top-down neck and decoupled heads."""

    def __init__(self, nc: int = 3, imgsz: int = 160) -> None:
        super().__init__()
        self.nc, self.imgsz, self.export = nc, imgsz, False
        self.no = 4 * REG_MAX + nc
        self.stem = nn.Sequential(ConvBN(3, 16, 3, 2), ConvBN(16, 24, 3, 2), Res(24))  # /4
        self.s8 = nn.Sequential(ConvBN(24, 40, 3, 2), Res(40))
        self.s16 = nn.Sequential(ConvBN(40, 64, 3, 2), Res(64))
        self.s32 = nn.Sequential(ConvBN(64, 64, 3, 2), ConvBN(64, 64, 1))
        self.lat32 = ConvBN(64, 64, 1)
        self.fuse16 = ConvBN(64, 64)
        self.lat16 = ConvBN(64, 40, 1)
        self.fuse8 = ConvBN(40, 40)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        chans = (40, 64, 64)
        self.box = nn.ModuleList(nn.Sequential(ConvBN(c, 32), nn.Conv2d(32, 4 * REG_MAX, 1)) for c in chans)
        self.cls = nn.ModuleList(nn.Sequential(ConvBN(c, 24), nn.Conv2d(24, nc, 1)) for c in chans)
        self.dfl = DFL()
        sizes = [(imgsz // s, imgsz // s) for s in STRIDES]
        anchors, strides = make_anchors(sizes, STRIDES)
        self.register_buffer("anchors", anchors.T.unsqueeze(0), persistent=False)  # [1, 2, N]
        self.register_buffer("strides", strides.T, persistent=False)  # [1, N]
        self._init_bias()

    def _init_bias(self) -> None:
        for box, cls, s in zip(self.box, self.cls, STRIDES):
            nn.init.constant_(box[-1].bias, 1.0)
            # YOLOv8 prior: ~5 objects per 640^2 image spread over the level's cells
            nn.init.constant_(cls[-1].bias, float(torch.log(torch.tensor(5 / self.nc / (640 / s) ** 2))))

    def levels(self, x: Tensor) -> list[Tensor]:
        """Raw per-level maps [B, 4*REG_MAX + nc, H, W]."""
        p8 = self.s8(self.stem(x))
        p16 = self.s16(p8)
        p32 = self.s32(p16)
        n16 = self.fuse16(p16 + self.up(self.lat32(p32)))
        n8 = self.fuse8(p8 + self.up(self.lat16(n16)))
        return [torch.cat((b(f), c(f)), 1) for f, b, c in zip((n8, n16, p32), self.box, self.cls)]

    def forward(self, x: Tensor) -> Tensor | list[Tensor]:
        feats = self.levels(x)
        if not self.export:
            return feats
        b = x.shape[0]
        y = torch.cat([f.view(b, self.no, -1) for f in feats], 2)
        box, cls = y.split((4 * REG_MAX, self.nc), 1)
        lt, rb = self.dfl(box).chunk(2, 1)
        x1y1 = self.anchors - lt
        x2y2 = self.anchors + rb
        xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * self.strides
        return torch.cat((xywh, cls.sigmoid()), 1)


class TinyCls(nn.Module):  # type: ignore[misc]  # torch is untyped under the project's mypy config
    """~0.1 M parameter crop classifier: four stride-2 stages, global average pool, linear."""

    def __init__(self, nc: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvBN(3, 16, 3, 2),
            ConvBN(16, 32, 3, 2),
            Res(32),
            ConvBN(32, 48, 3, 2),
            Res(48),
            ConvBN(48, 64, 3, 2),
            ConvBN(64, 96, 1),
        )
        self.head = nn.Linear(96, nc)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x).mean((2, 3)))


def fuse_bn(model: nn.Module) -> nn.Module:
    """Fold every Conv2d+BatchNorm2d pair into one biased conv (in place), as Ultralytics does."""
    for mod in model.modules():
        if isinstance(mod, ConvBN):
            conv, bn = mod[0], mod[1]
            assert isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)
            std = (bn.running_var + bn.eps).sqrt()
            fused = nn.Conv2d(
                conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, bias=True
            )
            fused.weight.data = conv.weight.data * (bn.weight.data / std).view(-1, 1, 1, 1)
            fused.bias.data = bn.bias.data - bn.running_mean * bn.weight.data / std
            mod[0] = fused
            mod[1] = nn.Identity()
    return model


# ----------------------------------------------------------------------------- detector loss


def box_iou_xyxy(a: Tensor, b: Tensor, ciou: bool = False, eps: float = 1e-7) -> Tensor:
    """Elementwise (broadcast) IoU of xyxy boxes; with ``ciou`` the Complete-IoU of YOLOv8's loss."""
    iw = (torch.minimum(a[..., 2], b[..., 2]) - torch.maximum(a[..., 0], b[..., 0])).clamp(0)
    ih = (torch.minimum(a[..., 3], b[..., 3]) - torch.maximum(a[..., 1], b[..., 1])).clamp(0)
    inter = iw * ih
    w1, h1 = a[..., 2] - a[..., 0], a[..., 3] - a[..., 1] + eps
    w2, h2 = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1] + eps
    iou = inter / (w1 * h1 + w2 * h2 - inter + eps)
    if not ciou:
        return iou
    cw = torch.maximum(a[..., 2], b[..., 2]) - torch.minimum(a[..., 0], b[..., 0])
    ch = torch.maximum(a[..., 3], b[..., 3]) - torch.minimum(a[..., 1], b[..., 1])
    c2 = cw**2 + ch**2 + eps
    rho2 = (
        (b[..., 0] + b[..., 2] - a[..., 0] - a[..., 2]) ** 2
        + (b[..., 1] + b[..., 3] - a[..., 1] - a[..., 3]) ** 2
    ) / 4
    v = (4 / torch.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


@torch.no_grad()  # type: ignore[untyped-decorator]
def assign(
    scores: Tensor,
    boxes: Tensor,
    points: Tensor,
    gt_box: Tensor,
    gt_cls: Tensor,
    gt_mask: Tensor,
    topk: int = 10,
    alpha: float = 0.5,
    beta: float = 6.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """Task-aligned assignment (YOLOv8 TAL, compact): returns target boxes, scores and fg mask.

    scores [B,N,nc] sigmoid, boxes [B,N,4] xyxy px, points [N,2] px, gt_box [B,M,4], gt_cls [B,M],
    gt_mask [B,M] bool.
    """
    b, n, nc = scores.shape
    m = gt_box.shape[1]
    if m == 0:
        return boxes.new_zeros(b, n, 4), scores.new_zeros(b, n, nc), torch.zeros(b, n, dtype=torch.bool)
    lt = points[None, None] - gt_box[..., None, :2]
    rb = gt_box[..., None, 2:] - points[None, None]
    in_gts = torch.cat((lt, rb), -1).amin(-1) > 1e-9  # [B,M,N]
    valid = in_gts & gt_mask[..., None]
    ious = box_iou_xyxy(gt_box[:, :, None], boxes[:, None]).clamp(0) * valid
    cls_scores = scores.gather(2, gt_cls.clamp(0)[:, None, :].expand(b, n, m)).transpose(1, 2)
    align = cls_scores.pow(alpha) * ious.pow(beta) * valid
    top = align.topk(min(topk, n), -1).indices
    mask_pos = torch.zeros_like(align).scatter_(-1, top, 1.0).bool() & valid
    multi = mask_pos.sum(1) > 1  # anchors claimed by several GTs keep the best-IoU one
    if multi.any():
        best = ious.argmax(1)
        one = F.one_hot(best, m).transpose(1, 2).bool()
        mask_pos = torch.where(multi[:, None], one, mask_pos)
    fg = mask_pos.any(1)
    idx = mask_pos.float().argmax(1)  # [B,N]
    t_box = gt_box.gather(1, idx[..., None].expand(b, n, 4))
    t_cls = gt_cls.gather(1, idx).clamp(0)
    align = align * mask_pos
    norm = (align * (ious * mask_pos).amax(-1, keepdim=True) / (align.amax(-1, keepdim=True) + 1e-9)).amax(1)
    t_scores = F.one_hot(t_cls, nc).float() * (norm * fg)[..., None]
    return t_box, t_scores, fg


def detector_loss(
    model: TinyDet, feats: list[Tensor], gt_box: Tensor, gt_cls: Tensor, gt_mask: Tensor
) -> tuple[Tensor, Tensor]:
    """YOLOv8 loss: 7.5 * CIoU + 0.5 * BCE + 1.5 * DFL; returns the total and the three parts."""
    b = feats[0].shape[0]
    pred = torch.cat([f.view(b, model.no, -1) for f in feats], 2).transpose(1, 2)  # [B,N,no]
    dist, logits = pred.split((4 * REG_MAX, model.nc), 2)
    pts = model.anchors[0].T  # [N,2] grid units
    stride = model.strides[0][:, None]  # [N,1]
    bins = torch.arange(REG_MAX, dtype=torch.float32)
    probs = dist.view(b, -1, 4, REG_MAX).softmax(-1)
    ltrb = (probs * bins).sum(-1)  # grid units
    boxes = torch.cat((pts - ltrb[..., :2], pts + ltrb[..., 2:]), -1) * stride  # px
    t_box, t_scores, fg = assign(
        logits.detach().sigmoid(), boxes.detach(), pts * stride, gt_box, gt_cls, gt_mask
    )
    tss = t_scores.sum().clamp(min=1.0)
    l_cls = F.binary_cross_entropy_with_logits(logits, t_scores, reduction="sum") / tss
    if fg.any():
        w = t_scores.sum(-1)[fg]
        l_box = ((1 - box_iou_xyxy(boxes[fg], t_box[fg], ciou=True)) * w).sum() / tss
        t_ltrb = torch.cat((pts[None] - t_box[..., :2] / stride, t_box[..., 2:] / stride - pts[None]), -1)
        t_ltrb = t_ltrb[fg].clamp(0, REG_MAX - 1.01)
        left = t_ltrb.long()
        wl = left + 1 - t_ltrb
        logp = dist[fg].view(-1, 4, REG_MAX).log_softmax(-1)
        dfl = -(
            logp.gather(-1, left[..., None])[..., 0] * wl
            + logp.gather(-1, (left + 1)[..., None])[..., 0] * (1 - wl)
        ).mean(-1)
        l_dfl = (dfl * w).sum() / tss
    else:
        l_box = l_dfl = logits.sum() * 0
    total = 7.5 * l_box + 0.5 * l_cls + 1.5 * l_dfl
    return total, torch.stack((l_box, l_cls, l_dfl)).detach()
