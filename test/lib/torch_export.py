"""The one way the test suite exports torch models: torch.onnx.export (the
TorchScript exporter of torch 1.13) at opset 17, static shapes, no constant
folding, the loss as the single output, exporter warnings silenced."""
import warnings

import torch


def export_with_loss(model, args, path, input_names, **options):
    """Exports `model(*args)` (which returns the scalar loss) to `path`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, opset_version=17, do_constant_folding=False,
                          input_names=input_names, output_names=["loss"], **options)
    return model
