"""The data side: labelled data from files, the hub or rows (sources), their targets per task
type, the tokenizer, and tokenized splits batched for training."""
