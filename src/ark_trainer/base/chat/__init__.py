"""Chat data, on the base floor: tool-call blocks in a model's text and the episode record read from a
conversation. Data, rewards, metrics and serving read them here; the agent code above builds on them."""
