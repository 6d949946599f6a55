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

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from onnx import GraphProto, NodeProto

LEARNED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
# a Conv whose input comes from these is arithmetic on a distribution (YOLOv8 DFL), not a feature layer
_DISTRIBUTION_OPS = frozenset({"Softmax", "Transpose", "Reshape"})


def ensure_node_names(graph: GraphProto) -> int:
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


def _is_distribution_conv(node: NodeProto, producer: dict[str, int], nodes: list[NodeProto]) -> bool:
    if node.op_type != "Conv" or not node.input or node.input[0] not in producer:
        return False
    return bool(nodes[producer[node.input[0]]].op_type in _DISTRIBUTION_OPS)


def postprocess_tail_indices(graph: GraphProto) -> list[int]:
    """Indices (in ``graph.node``) of the nodes between the last learned layers and the outputs.

    Works on indices: protobuf may hand out a fresh Python wrapper per access, so ``id()`` of a
    node is not a stable identity.
    """
    nodes = list(graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    stack = [producer[o.name] for o in graph.output if o.name in producer]
    seen: set[int] = set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        node = nodes[i]
        if node.op_type in LEARNED_OPS and not _is_distribution_conv(node, producer, nodes):
            continue  # the head's last learned layer: the boundary, stays quantized
        seen.add(i)
        stack.extend(producer[x] for x in node.input if x in producer)
    return sorted(seen)


def postprocess_tail(graph: GraphProto) -> list[NodeProto]:
    """The tail's nodes, in graph order."""
    nodes = list(graph.node)
    return [nodes[i] for i in postprocess_tail_indices(graph)]


def postprocess_tail_names(graph: GraphProto) -> list[str]:
    ensure_node_names(graph)
    return [n.name for n in postprocess_tail(graph)]


def hoist_transposed_softmax(graph: GraphProto) -> int:
    """Rewrite ``Softmax(axis=a)(Transpose(perm)(x))`` as ``Transpose(perm)(Softmax(axis=perm[a])(x))``.

    Exact (softmax is per-slice, the transpose only moves slices). Why: YOLOv8's DFL softmaxes
    over axis 1 of a transposed [1,16,4,N] tensor, which onnxruntime's CPU kernel handles by
    transposing internally - 12-19 ms per YOLOv8n run here (INT8 runs in ~40 ms), against ~1 ms
    for the same softmax before the transpose. Needs opset >= 13 Softmax semantics (single axis).
    Returns how many were rewritten.
    """
    done = 0
    while True:
        pair = _transposed_softmax(graph)
        if pair is None:
            return done
        ti, si, new_axis = pair
        nodes = list(graph.node)
        tr, sm = nodes[ti], nodes[si]
        x, mid, y = tr.input[0], tr.output[0], sm.output[0]
        from onnx import helper

        # new wiring: x -> Softmax(axis=perm[axis]) -> mid -> Transpose(perm) -> y
        sm_new = helper.make_node("Softmax", [x], [mid], sm.name, axis=new_axis)
        tr_new = helper.make_node("Transpose", [mid], [y], tr.name)
        tr_new.attribute.extend(tr.attribute)
        nodes[ti], nodes[si] = sm_new, tr_new  # the Softmax now runs first: order stays topological
        del graph.node[:]
        graph.node.extend(nodes)
        stale = [vi for vi in graph.value_info if vi.name == mid]  # ``mid`` now has the untransposed shape
        for vi in stale:
            graph.value_info.remove(vi)
        done += 1


def _transposed_softmax(graph: GraphProto) -> Optional[tuple[int, int, int]]:
    """(transpose index, softmax index, new softmax axis) of the first rewritable pair."""
    nodes = list(graph.node)
    producer = {out: i for i, node in enumerate(nodes) for out in node.output}
    consumers: dict[str, int] = {}
    for node in nodes:
        for i in node.input:
            consumers[i] = consumers.get(i, 0) + 1
    graph_outputs = {o.name for o in graph.output}
    for si, sm in enumerate(nodes):
        if sm.op_type != "Softmax" or sm.input[0] not in producer:
            continue
        ti = producer[sm.input[0]]
        tr = nodes[ti]
        if tr.op_type != "Transpose" or consumers.get(tr.output[0], 0) != 1 or tr.output[0] in graph_outputs:
            continue
        perm = next((list(a.ints) for a in tr.attribute if a.name == "perm"), None)
        if not perm:
            continue
        axis = next((a.i for a in sm.attribute if a.name == "axis"), -1) % len(perm)
        return ti, si, perm[axis]
    return None
