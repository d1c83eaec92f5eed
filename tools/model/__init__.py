"""The demo detector (models/conveyor-*.onnx): the network, training, evaluation, conversion.

    python -m tools.model.train --seed 3 --minutes 57 --out runs/v2 --models models   (bootstrap.sh --train)
    python -m tools.model.eval --model models/conveyor-640.onnx --size 640 [--compare B C]
    python -m tools.model.convert_fp16 SRC DST       (float16 weights and compute)
    python -m tools.model.quantize_int8 SRC DST      (static INT8, QDQ, per-channel)

`yolo_net` is the network, `coco_eval` the mAP helpers the tests use too, `yolo_dataset` reads YOLO-format
datasets (the daemon's `[capture]`, relabelled) for `train --extra DIR`. See models/README.md.
"""
