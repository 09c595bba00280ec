"""`wander ui`: a local web app to play a policy, replay evaluation games and read the learning curves."""
