"""The docs stay true: their code runs, their maps and figures match the code."""
