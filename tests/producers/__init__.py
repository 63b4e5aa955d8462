"""Real AG-UI producers, scripted: the recorder behind tests/data/producers/.

``python tests/producers/record.py`` drives pydantic-ai (``FunctionModel``) and
ag-ui-langgraph (a scripted chat model) through their own AG-UI HTTP endpoints
and stores the SSE bytes exactly as a client receives them. See
docs/testing.md, "Recording real producers".
"""
