"""The words a dataset's question ends with, so that its answer can be read out of a reply:
files of a user's and public sets (conductor_cli.public) alike."""

from __future__ import annotations

CODE_INSTRUCTION = (
    "Complete the following Python function. "
    "Reply with the whole function in one ```python code block.\n\n"
)
MCQ_INSTRUCTION = "Answer with the letter of the correct choice."
# Exact and numeric scoring read the text after the last "Answer:"; asking for that line
# keeps a correct but chatty reply from being scored wrong.
QA_INSTRUCTION = 'End your reply with a line "Answer: <your answer>".'
