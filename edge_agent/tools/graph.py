"""Find, by graph structure, the float-only tail of a model (YOLO box decode, softmax, ...).

Why: a YOLOv8/YOLO11 export ends with DFL (softmax + a fixed 1x1 Conv), the anchor/stride box
decode (Sub/Add/Div/Mul) and a final Concat that puts pixel boxes (0..640) next to sigmoid scores
(0..1). Quantizing that Concat with one int8 scale rounds every score to 0, so a whole-model
quantization returns no detections at all. The tail is cheap arithmetic; it must stay float.

We find it without relying on node names: walk back from each graph output through every node
that is not a learned layer (Conv/Gemm/MatMul), and stop at the learned layers that feed it
(the head's last convolutions, which *should* be quantized). A Conv fed by Softmax/Transpose/
Reshape is not a learned feature layer but the DFL expectation (weights 0..15), so the walk goes
through it.
"""

from __future__ import annotations

from typing import Any

LEARNED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
# a Conv whose input comes from these is arithmetic on a distribution (YOLOv8 DFL), not a feature layer
_DISTRIBUTION_OPS = frozenset({"Softmax", "Transpose", "Reshape"})


def ensure_node_names(graph: Any) -> int:
    """Give every unnamed node a unique name (``nodes_to_exclude`` works by name); returns how many."""
    used = {n.name for n in graph.node if n.name}
    added = 0
    for i, node in enumerate(graph.node):
        if not node.name:
            name = f"{node.op_type}_{i}"
            while name in used:
                name += "_"
            node.name = name
            used.add(name)
            added += 1
    return added


def _is_distribution_conv(node: Any, producer: dict[str, Any]) -> bool:
    if node.op_type != "Conv" or not node.input:
        return False
    src = producer.get(node.input[0])
    return src is not None and src.op_type in _DISTRIBUTION_OPS


def postprocess_tail(graph: Any) -> list[Any]:
    """Nodes between the last learned layers and the graph outputs, in graph order."""
    producer = {out: node for node in graph.node for out in node.output}
    stack = [producer[o.name] for o in graph.output if o.name in producer]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        if node.op_type in LEARNED_OPS and not _is_distribution_conv(node, producer):
            continue  # the head's last learned layer: the boundary, stays quantized
        seen.add(id(node))
        stack.extend(producer[i] for i in node.input if i in producer)
    return [n for n in graph.node if id(n) in seen]


def postprocess_tail_names(graph: Any) -> list[str]:
    ensure_node_names(graph)
    return [n.name for n in postprocess_tail(graph)]


def hoist_transposed_softmax(graph: Any) -> int:
    """Rewrite ``Softmax(axis=a)(Transpose(perm)(x))`` as ``Transpose(perm)(Softmax(axis=perm[a])(x))``.

    Exact (softmax is per-slice, the transpose only moves slices). Why: YOLOv8's DFL softmaxes
    over axis 1 of a transposed [1,16,4,N] tensor, which onnxruntime's CPU kernel handles by
    transposing internally - 12 ms of a ~150 ms INT8 YOLOv8n run here, against ~1 ms for the
    same softmax before the transpose. Needs opset >= 13 Softmax semantics (single axis).
    Returns how many were rewritten.
    """
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, int] = {}
    for node in graph.node:
        for i in node.input:
            consumers[i] = consumers.get(i, 0) + 1
    graph_outputs = {o.name for o in graph.output}
    done = 0
    for sm in list(graph.node):
        if sm.op_type != "Softmax":
            continue
        tr = producer.get(sm.input[0])
        if tr is None or tr.op_type != "Transpose" or consumers.get(tr.output[0], 0) != 1:
            continue
        if tr.output[0] in graph_outputs:
            continue
        perm = next((list(a.ints) for a in tr.attribute if a.name == "perm"), None)
        if not perm:
            continue
        axis_attr = next((a for a in sm.attribute if a.name == "axis"), None)
        axis = axis_attr.i if axis_attr is not None else -1
        axis = axis % len(perm)
        # new wiring: x -> Softmax(axis=perm[axis]) -> mid -> Transpose(perm) -> softmax output
        x, mid, y = tr.input[0], tr.output[0], sm.output[0]
        if axis_attr is None:
            from onnx import helper

            sm.attribute.append(helper.make_attribute("axis", perm[axis]))
        else:
            axis_attr.i = perm[axis]
        sm.input[0] = x
        sm.output[0] = mid
        tr.input[0] = mid
        tr.output[0] = y
        # keep topological order: the Softmax now runs before the Transpose
        nodes = list(graph.node)
        ti, si = nodes.index(tr), nodes.index(sm)
        nodes[ti], nodes[si] = nodes[si], nodes[ti]
        del graph.node[:]
        graph.node.extend(nodes)
        producer[mid], producer[y] = sm, tr
        stale = [vi for vi in graph.value_info if vi.name == mid]  # ``mid`` now has the untransposed shape
        for vi in stale:
            graph.value_info.remove(vi)
        done += 1
    return done
