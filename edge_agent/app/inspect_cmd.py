"""``edge-agent inspect MODEL``: what is this model file (inputs, outputs, classes, quantization)?"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from edge_agent.app.infer_cmd import add_model_args


def register(sub: Any) -> None:
    p = sub.add_parser("inspect", help="describe an ONNX model file", description=__doc__)
    p.add_argument("model", help="ONNX model file")
    p.add_argument("--labels", help="labels file overriding the model's class names")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    add_model_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edge_agent.adapters.runtime import OnnxModel

    m = OnnxModel(args.model, provider=args.provider, threads=args.threads, labels=args.labels)
    info = m.info.to_json()
    if args.json:
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return 0
    w = sys.stdout.write
    w(f"model        {info['path']}\n")
    w(f"size         {m.info.size_bytes / 1e6:.2f} MB  sha256 {m.info.sha256[:16]}...\n")
    w(f"producer     {info['producer'] or '?'}  opsets {info['opsets']}\n")
    w(f"task         {info['task'] or '?'}  imgsz {info['imgsz']}  stride {info['stride']}\n")
    w(f"quantization {info['quantization']}\n")
    for t in m.info.inputs:
        w(f"input        {t.name} {list(t.shape)} {t.type}\n")
    for t in m.info.outputs:
        w(f"output       {t.name} {list(t.shape)} {t.type}\n")
    names = m.info.names
    shown = ", ".join(f"{k}:{v}" for k, v in list(names.items())[:12])
    w(f"classes      {len(names)}  {shown}{' ...' if len(names) > 12 else ''}\n")
    top_ops = ", ".join(f"{k} x{v}" for k, v in m.info.graph.op_counts.most_common(8))
    w(f"operators    {sum(m.info.graph.op_counts.values())} nodes: {top_ops}\n")
    w(f"providers    {', '.join(m.info.providers)}  ({m.info.provider_reason})\n")
    w(f"load+warmup  {m.info.load_ms:.0f} ms\n")
    return 0
