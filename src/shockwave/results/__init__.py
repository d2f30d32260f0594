"""What a run produces, whichever driver ran it: the typed result models (`model.py`), the run metrics shared by
every driver (`metrics.py`), what decided the numbers (`provenance.py`), and their rendering (`report.py`)."""
