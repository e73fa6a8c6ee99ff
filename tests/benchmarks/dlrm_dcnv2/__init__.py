"""The dlrm_dcnv2 benchmark's tests."""
