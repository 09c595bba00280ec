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

    # The type hints are MLflow's input and output schema (it reads them when the class is defined): a list of
    # conversations, each a list of messages of string fields ({"role": ..., "content": ...}), and a reply per
    # conversation. MLflow checks a request against them and serves `{"inputs": [conversation, ...]}`; without
    # them it warns at each load of this file (register imports it, log_model and load_model run it).
    def predict(self, context, model_input: list[list[dict[str, str]]], params=None) -> list[str]:
        """The next assistant message of each conversation."""
        return [reply.content for reply in self.policy(list(model_input))]


mlflow.models.set_model(CheckpointModel())
