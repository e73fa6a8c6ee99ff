"""bert: BERT-large masked-LM pretraining on Wikipedia (see README.md)."""
