"""What a run takes in: job descriptions, traces, the model catalog, throughputs, profiles, entities and prices."""
