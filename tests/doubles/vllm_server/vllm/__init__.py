"""Test double of vLLM (see tests/doubles/vllm_server/README.md)."""
