"""The services floor: the pipeline that runs the stages, deploy, the training loop, OpenClaw, the natural-language
agent and the dashboard."""
