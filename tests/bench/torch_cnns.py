"""ResNet-50 and MobileNetV2 in plain torch, randomly initialised, for ``edge-agent export-check
--module tests/bench/torch_cnns.py:resnet50`` (docs/performance.md). Speed does not depend on the
weights, and no weights can be downloaded here; torchvision's wheel for torch 2.13.0 does not load
(``operator torchvision::nms does not exist``), so the two architectures are written out as
torchvision defines them (ResNet v1.5: the stride on the 3x3 conv; MobileNetV2 at width 1.0)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: Any) -> Any:
        return self.relu(self.body(x) + self.down(x))


def resnet50(num_classes: int = 1000) -> nn.Module:
    torch.manual_seed(0)  # the same random weights each run
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        parts: list[nn.Module] = [_conv_bn(cin, hidden, 1)] if expand != 1 else []
        parts += [
            _conv_bn(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.body = nn.Sequential(*parts)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Any) -> Any:
        return x + self.body(x) if self.residual else self.body(x)


def mobilenet_v2(num_classes: int = 1000) -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
    cin = 32
    for t, c, n, s in (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ):
        for i in range(n):
            layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
            cin = c
    layers += [
        _conv_bn(cin, 1280, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(1280, num_classes),
    ]
    return nn.Sequential(*layers)
