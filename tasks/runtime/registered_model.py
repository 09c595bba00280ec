"""The registered model's pyfunc wrapper: a checkpoint folder that answers conversations.

Logged as code (MLflow's models from code: `register` passes this file, MLflow runs it when the model loads and
takes the model `set_model` names), not as a pickled object, which would tie the registry to this class's pickle."""

from __future__ import annotations

import mlflow.models
import mlflow.pyfunc


class CheckpointModel(mlflow.pyfunc.PythonModel):
    """`predict` takes a list of conversations (lists of chat messages) and returns the replies."""

    def load_context(self, context) -> None:
        """Load the checkpoint as a greedy batched policy."""
        from wander.policies.transformers_policy import TransformersPolicy

        self.policy = TransformersPolicy.from_pretrained(context.artifacts["checkpoint"], greedy=True)

    # No type hints on predict: MLflow would turn them into a strict input schema of strings.
    def predict(self, context, model_input, params=None):
        """The next assistant message of each conversation."""
        return [reply.content for reply in self.policy(list(model_input))]


mlflow.models.set_model(CheckpointModel())
