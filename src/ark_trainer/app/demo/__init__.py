"""The embedded demo: a synthetic Chinese customer-service QC data set and a tiny base model made here."""
