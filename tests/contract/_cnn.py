"""The small CNN the contract suites train and compile: convolutions, batch norm, pooling, a head
(the layers of a timm-style CNN stem and head)."""

from __future__ import annotations

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            # No bias before BatchNorm (as real CNNs do): its gradient is zero up to rounding
            # noise, which Adam normalises into full-size steps, so any kernel that rounds unlike
            # the CPU would move it arbitrarily.
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))
