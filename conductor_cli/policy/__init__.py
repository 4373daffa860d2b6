"""The planning policy: what a trained conductor needs when it plans, on every `ask`: the
registry of trained conductors (the user's and the shipped ones), reading a trained head or step
head, the features it reads from the conductor's hidden state, the workflow shapes it chooses
from, and the chooser that plans with them. Learning them is train/'s job, which builds on this.
"""
