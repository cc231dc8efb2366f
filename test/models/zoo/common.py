"""Shared pieces of the model zoo (test/models/zoo_vs_pytorch.py): every model
is built from library code (transformers' and torchvision's classes) at a
small size with random weights, and wrapped so that its forward returns the
scalar loss, which test/lib/torch_export.py's export_with_loss puts in the
graph as its only output.

Each zoo module (gpt2.py, bert.py, ...) defines NAMES (the graph's inputs),
and with entry_points build() -> (model, example inputs), seeded so that every
call builds the same weights, and export(path, batch=None)."""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "lib"))

from torch_export import export_with_loss  # noqa: E402


def distinct(model, generator=None):
    """Gives every constant parameter and floating buffer (LayerNorm and RMSNorm
    weights of ones, biases of zeros, BatchNorm's running statistics) its own
    random values near the constant. torch's exporter merges initializers with
    equal contents into one tensor, which cleave would then train as one
    parameter where PyTorch trains several."""
    with torch.no_grad():
        tensors = list(model.named_parameters()) + [
            (n, b) for n, b in model.named_buffers() if b.is_floating_point()]
        for _, t in tensors:
            if t.numel() > 1 and bool((t == t.reshape(-1)[0]).all()):
                base = float(t.reshape(-1)[0])
                if "running_var" in _ or base == 1.0:
                    t.uniform_(0.5, 1.5)
                else:
                    t.add_(torch.empty_like(t).uniform_(-0.1, 0.1))
    return model


class LanguageModelLoss(torch.nn.Module):
    """A transformers language model whose forward returns its own loss."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, idx, targets):
        return self.net(input_ids=idx, labels=targets).loss


class ClassifierLoss(torch.nn.Module):
    """An image classifier whose forward returns the cross-entropy of its
    logits."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, labels):
        return torch.nn.functional.cross_entropy(self.net(x), labels)


def classifier_loss_without_dropout(net):
    """ClassifierLoss of a torchvision net whose classifier holds Dropout(p=0)
    (mobilenet_v2 and efficientnet first, mobilenet_v3 between its two
    Linears), each replaced by the identity: without them the graph has no
    training-mode Dropout op (whose masks are cleave's own)."""
    for i, layer in enumerate(net.classifier):
        if isinstance(layer, torch.nn.Dropout):
            net.classifier[i] = torch.nn.Identity()
    return ClassifierLoss(net)


def entry_points(make_model, make_inputs, names, training_mode=False):
    """A zoo module's build() and export(path, batch=None), as
    test/distributed/dp_vs_single.py's Model calls them: build() gives
    make_model()'s model with distinct constants, in training mode, and
    make_inputs(generator)'s example inputs, seeded alike on every call;
    export() writes it (export_model) with the graph inputs `names`."""
    def build():
        torch.manual_seed(0)
        model = distinct(make_model())
        return model.train(), make_inputs(torch.Generator().manual_seed(1))

    def export(path, batch=None):
        return export_model(build, names, path, batch, training_mode)

    return build, export


def token_inputs(vocab, batch, seq):
    """Example token ids and targets, batch x seq each."""
    return lambda g: (labels(vocab, (batch, seq), g), labels(vocab, (batch, seq), g))


def image_inputs(classes, batch):
    """Example 32x32 RGB images and their class labels."""
    return lambda g: (torch.randn((batch, 3, 32, 32), generator=g),
                      labels(classes, (batch,), g))


def repeat_batch(args, batch):
    """The example inputs cut or repeated to `batch` samples."""
    return tuple(torch.cat([a] * batch)[:batch] for a in args)


def export_model(build, names, path, batch=None, training_mode=False):
    """Exports build()'s model at `batch` samples (the example's by default)
    and returns (model, inputs), the model holding what the file holds. With
    training_mode (BatchNorm models) the export is in training mode; its
    exporter runs a forward that moves BatchNorm's running statistics and
    writes the moved ones, so the module's buffers are set
    from the file. A parameter that differs from the file's is an error."""
    model, args = build()
    if batch is not None:
        args = repeat_batch(args, batch)
    options = {}
    if training_mode:
        options["training"] = torch.onnx.TrainingMode.TRAINING
    export_with_loss(model, args, path, names, **options)
    stored = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in model.state_dict().items():
            if name not in stored:
                continue
            if name in parameters:
                if not np.array_equal(stored[name], value.numpy()):
                    raise SystemExit(f"FAIL: {path} holds another {name} than the module")
            else:
                value.copy_(torch.from_numpy(stored[name].copy()))
    return model, args


def labels(num_classes, shape, generator):
    """Random class labels that include the largest class (the test draws its
    data below the example's maximum)."""
    out = torch.randint(0, num_classes, shape, generator=generator, dtype=torch.int64)
    out.view(-1)[0] = num_classes - 1
    return out
