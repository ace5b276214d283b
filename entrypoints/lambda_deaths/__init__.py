"""The deaths Lambda: an ECS task of the worker service STOPPED (EventBridge) -> its workers'
sessions ended at once and their connections hinted (application/deaths.py).

Handler: `entrypoints.lambda_deaths.handler.handler`, shipped in the router's package.
"""
