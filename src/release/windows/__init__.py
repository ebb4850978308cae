"""Windows build hosts in GitHub Actions.

The MSVC developer environment (:mod:`~release.windows.msvc_env`) and a CUDA toolkit installed from
NVIDIA's redistributable archives (:mod:`~release.windows.cuda_redist`).
"""
