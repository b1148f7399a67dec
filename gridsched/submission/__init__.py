"""Building a submission: the script and its directives, the compatibility rules of other
schedulers, output templates, publishing the request.
"""
