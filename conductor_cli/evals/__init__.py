"""`conductor eval`: compare answering strategies on a dataset of problems with known answers."""
