"""Reading cleave checkpoints in Python, independently of cleave's reader:
the safetensors package reads each rank's file, and the layouts documented
in docs/formats.md ("Checkpoints") put the global tensors back together."""
import json

import numpy as np
from safetensors.numpy import load_file


def _part_indices(layout, coordinates, mesh):
    """The global row-major element indices of the part a rank holds (its
    tp part in storage order, or the whole tensor)."""
    shape = layout.get("global_shape", layout["shape"])
    indices = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    split = layout.get("split")
    if split:
        ranks, rank = mesh[split["axis"]], coordinates.get(split["axis"], 0)
        block = shape[split["dim"]] // split["blocks"]
        part = block // ranks
        indices = np.concatenate(
            [np.take(indices, range(k * block + rank * part, k * block + (rank + 1) * part),
                     axis=split["dim"]) for k in range(split["blocks"])], axis=split["dim"])
    return indices.reshape(-1)


def global_tensors(checkpoint):
    """{name: array} of every global tensor of the checkpoint: parameters,
    state, and each optimizer slot of ZeRO 1/2's flat buffer per parameter
    ('adam.m:fc1.weight'). Fails if an element is held by no shard."""
    index = json.load(open(f"{checkpoint}/index.json"))
    files = {f["name"]: load_file(f"{checkpoint}/{f['name']}") for f in index["files"]}
    mesh = {a["name"]: a["size"] for a in index["mesh"]["axes"]} if index["mesh"] else {}
    layouts = {t["name"]: t["layout"] for t in index["tensors"]}
    # ZeRO 1/2's flat buffers by name: a list, one per pipeline stage (an
    # object in checkpoints written before pipelines had ZeRO 1/2).
    flats = index.get("flat_parameters") or []
    flats = {f["name"]: f for f in (flats if isinstance(flats, list) else [flats])}
    whole, shapes = {}, {}

    def put(name, shape, indices, values):
        if name not in whole:
            whole[name] = np.full(int(np.prod(shape)), np.nan, dtype=np.float64)
            shapes[name] = (shape, values.dtype)
        whole[name][indices] = values

    for tensor in index["tensors"]:
        layout = tensor["layout"]
        for shard in tensor["shards"]:
            data = files[shard["file"]][shard["key"]].reshape(-1)
            coordinates = shard["coordinates"]
            flat = flats.get(layout.get("state_of"))
            if flat:
                prefix = tensor["name"][:-len(flat["name"]) - 1]
                first = coordinates.get(flat["slices"]["axis"], 0) * flat["slices"]["slice"]
                for member in flat["members"]:
                    parameter = layouts[member["name"]]
                    begin = max(first, member["offset"])
                    end = min(first + flat["slices"]["slice"],
                              member["offset"] + member["elements"])
                    if begin >= end:
                        continue
                    indices = _part_indices(parameter, coordinates, mesh)
                    put(f"{prefix}:{member['name']}",
                        parameter.get("global_shape", parameter["shape"]),
                        indices[begin - member["offset"]:end - member["offset"]],
                        data[begin - first:end - first])
                continue
            indices = _part_indices(layout, coordinates, mesh)
            if "zero3" in layout:
                zero3 = layout["zero3"]
                first = coordinates[zero3["axis"]] * zero3["slice"]
                end = max(first, min(first + zero3["slice"], zero3["elements"]))
                indices, data = indices[first:end], data[:end - first]
            put(tensor["name"], layout.get("global_shape", layout["shape"]), indices, data)
    tensors = {}
    for name, values in whole.items():
        shape, dtype = shapes[name]
        assert not np.isnan(values).any(), f"{checkpoint}: {name} has elements in no shard"
        tensors[name] = values.astype(dtype).reshape(shape)
    return tensors
