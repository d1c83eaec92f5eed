"""Inference: model files, ONNX Runtime sessions, the lanes that run batches through them.

What the room is for: turning batches of letterboxed frames into `FrameResult`s, one lane per
model size, kept serving through GPU faults. It may import `daemon.core` and `daemon.config`
only (not ingest, batching, publish or thermal: the builder, `daemon.pipeline`, wires those to
it through the Protocols in `protocols`).

Entry points (what `daemon.pipeline`, the builder, and `daemon.ops` use):
- `build.prove_models`: every model file checked and the configured provider proved on a real
  session, before READY; `build.LaneWorkers` builds each lane worker's engine and stage;
- `model_check.validate_models` / `camera_rules`: the configured model files against the config;
  `model_file.load_model_info` (`ModelInfo`, `ModelError`) for one file, `describe_models` for
  `check-config`;
- `engine.EngineFactory` / `Engine`: one verified, warmed-up session (`providers` maps and
  verifies the execution providers, `EngineError`, `ProviderError`);
- `placement.choose` / `device_path`: CPU or CUDA for pre- and post-processing, decided once;
- `serving.ServingEngine`: a lane worker's engine, with its rebuild and breaker policies
  (`policies`) and its builder thread (`session_builds`: sessions built, rebuilt, closed);
- `stage.InferenceStage`: fill the batch, run, decode + NMS (`postprocess`), per-camera rules;
  `device_stage.DeviceInference` its device path;
- `lanes.Lanes`: every lane's workers, started on first use; results leave through the one
  `publish` callable the builder wires;
- `swap.ModelSwapper` (`ModelSwap`, `SwapError`): a model of one size swapped between two batches
  after its checks, warm-up and canary (the models API and a reload).

Inside: `layouts/` (one module per layout family behind `layouts.base.LayoutFamily`, listed in
`layouts.registry.FAMILIES`: recognition, input convention, expected shape, decode), `recognise`
(asks every family how sure it is of a file's outputs),
`model_meta` (metadata and config key by key), `iobinding`, `tensorrt_cache`,
`device_preprocess` and `letterbox_kernel` (the YUV letterbox on the device).
"""
