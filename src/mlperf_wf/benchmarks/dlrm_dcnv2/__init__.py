"""dlrm_dcnv2: DLRM with DCNv2 cross layers on Criteo 1TB multi-hot (TorchRec reference)."""
