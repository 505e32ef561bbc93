"""The training stages: RFT (sample, score, select, fine-tune) and GRPO, both on TRL."""
