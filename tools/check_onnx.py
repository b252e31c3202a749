#!/usr/bin/env python3
"""Checks a generator exported by `ganengine export` against `ganengine generate`.

The model must pass onnx.checker (full check, with shape inference), have a free batch
dimension, and, run by onnxruntime on the noise that `ganengine generate --save-tensor` saved,
give the images generate saved there within --tolerance (max absolute difference).

Usage: check_onnx.py MODEL.onnx TENSORS.safetensors [--tolerance 1e-5]
Needs onnx, onnxruntime, numpy and safetensors (tools/check_onnx_ci.sh installs them in a venv).
"""
import argparse
import sys

import numpy as np
import onnx
import onnxruntime
from safetensors.numpy import load_file


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("tensors")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    model = onnx.load(args.model)
    onnx.checker.check_model(model, full_check=True)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 17:
        sys.exit("%s: opset %d, expected 17 or later" % (args.model, opset))
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    if batch.dim_param == "" or batch.HasField("dim_value"):
        sys.exit("%s: the input's batch dimension is fixed; expected a symbolic one" % args.model)

    saved = load_file(args.tensors)
    noise, images = saved["noise"].astype(np.float32), saved["images"].astype(np.float32)
    session = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    (input_meta,), (output_meta,) = session.get_inputs(), session.get_outputs()
    if (input_meta.name, output_meta.name) != ("z", "image"):
        sys.exit("%s: input %s and output %s, expected z and image" % (args.model, input_meta.name, output_meta.name))
    (got,) = session.run(None, {"z": noise})
    if got.shape != images.shape:
        sys.exit("onnxruntime gives %s, ganengine generate %s" % (got.shape, images.shape))
    # Two batch sizes through the same model: the batch dimension really is free.
    (half,) = session.run(None, {"z": noise[:1]})
    diff = float(np.max(np.abs(got - images)))
    diff_one = float(np.max(np.abs(half - images[:1])))
    print("%s: opset %d, %d nodes, batch %s; onnxruntime vs ganengine generate: max |diff| %.3g (batch %d), %.3g (batch 1)"
          % (args.model, opset, len(model.graph.node), batch.dim_param, diff, len(noise), diff_one))
    if not (diff <= args.tolerance and diff_one <= args.tolerance):
        sys.exit("max |diff| above the tolerance %g" % args.tolerance)


if __name__ == "__main__":
    main()
