"""The ordering verifier (agui_pipes.verify): one test per rule and wording."""
