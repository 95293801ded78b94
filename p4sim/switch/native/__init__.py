"""The native switch engine: pipelines generated in C from BMv2 JSON (`ccodegen`),
compiled and loaded at start (`build`), behind the Python API of `V1Switch` (`engine`).
`pipeline.h` is the contract with the native packet loop.
"""
