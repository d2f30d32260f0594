"""The Shockwave policy: predictor, fairness targets, market program, round layout and the policy around them."""
