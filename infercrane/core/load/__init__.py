"""From a stack's raw values to the model: loading (validate, merge the environment), consistency (rules across fields), problems (where and how to fix). Pure core."""
