"""The scenario file the mock backend's tests share (tests/test_mock_*.py)."""

SCENARIOS = """\
version: 1
seed: 7
scenarios:
  - name: weather-shown
    match: {tool_result: show_weather}
    script:
      - text: "The card says {{tool_result}}."
  - name: weather
    match: {user: "(?i)weather"}
    script:
      - reasoning: "Look it up, then show it."
      - text: "Checking the weather."
      - tool_calls:
          - {name: get_weather, args: {city: Lisbon}, result: {temp: 21}}
          - {name: show_weather, args: {temp: 21}}
  - name: paced
    match: {user: "^paced$"}
    pace: 0.05
    script:
      - text: "one two three"
  - name: stateful
    match: {user: state}
    script:
      - state: {snapshot: {city: Lisbon, days: 2}}
      - state: {delta: [{op: replace, path: /days, value: 3}]}
      - custom: {name: progress, value: 1}
  - name: delegated
    match: {user: delegate}
    script:
      - step:
          name: plan
          script:
            - subagent:
                name: expert
                description: knows the city
                script: [{text: "Sunny."}]
                result: {sunny: true}
            - subagent: {name: flaky, error: "no forecast"}
  - name: approved
    match: {resume: true}
    script: [{text: "Approved, going ahead."}]
  - name: approval
    match: {user: "delete"}
    script:
      - tool_call: {name: delete_files, args: {path: /tmp}}
    outcome:
      interrupt: {reason: tool_approval, message: "Delete /tmp?", tool_call: delete_files}
  - name: broken
    match: {user: boom}
    outcome: {error: {message: "the model is down", code: MODEL_DOWN}}
  - name: vip
    match: {thread: "vip-.*", forwarded_props: {tier: gold}}
    script: [{text: "Welcome back."}]
  - name: planted
    match: {user: planted}
    fault: "duplicate=2"
    script: [{text: "a b"}]
  - name: long
    match: {user: long}
    script: [{text: "one two three four five six"}]
"""
