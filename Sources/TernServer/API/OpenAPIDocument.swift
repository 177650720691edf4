/// The API's contract, served at `GET /openapi.json`: every route, parameter, body, answer and secret.
/// `OpenAPITests` fails when a route is missing from it or it names one that does not exist; `scripts/test.sh` runs
/// schemathesis against a live `tern serve` with it.
enum OpenAPIDocument {
    static let json = #"""
{
 "openapi": "3.1.0",
 "info": {
  "title": "Tern",
  "version": "1",
  "description": "A self-hosted push notification service for iOS apps. Who may make which call: README, 'Who may do what'."
 },
 "servers": [
  {
   "url": "/"
  }
 ],
 "paths": {
  "/health": {
   "get": {
    "operationId": "health",
    "summary": "The process answers",
    "tags": [
     "system"
    ],
    "security": [],
    "responses": {
     "200": {
      "description": "ok",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Status"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    }
   }
  },
  "/ready": {
   "get": {
    "operationId": "ready",
    "summary": "The process and its database answer",
    "tags": [
     "system"
    ],
    "security": [],
    "responses": {
     "200": {
      "description": "ready",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Status"
        }
       }
      }
     },
     "503": {
      "description": "the database does not answer",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Status"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    }
   }
  },
  "/metrics": {
   "get": {
    "operationId": "metrics",
    "summary": "Prometheus metrics",
    "description": "answers anyone, or, when the node's http.metricsToken is set, that token only",
    "tags": [
     "system"
    ],
    "security": [
     {},
     {
      "metricsToken": []
     }
    ],
    "responses": {
     "200": {
      "description": "metrics",
      "content": {
       "text/plain": {
        "schema": {
         "type": "string"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    }
   }
  },
  "/openapi.json": {
   "get": {
    "operationId": "openapi",
    "summary": "This document",
    "tags": [
     "system"
    ],
    "security": [],
    "responses": {
     "200": {
      "description": "the OpenAPI document",
      "content": {
       "application/json": {
        "schema": {
         "type": "object"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    }
   }
  },
  "/v1/apps": {
   "post": {
    "operationId": "createApp",
    "summary": "Create an app; its secrets are in this answer only",
    "tags": [
     "admin"
    ],
    "security": [
     {
      "adminToken": []
     }
    ],
    "responses": {
     "201": {
      "description": "created",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/App"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/AppCreate"
       }
      }
     }
    }
   },
   "get": {
    "operationId": "listApps",
    "summary": "List the apps",
    "tags": [
     "admin"
    ],
    "security": [
     {
      "adminToken": []
     }
    ],
    "responses": {
     "200": {
      "description": "the apps",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/AppList"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    }
   }
  },
  "/v1/apps/{app}": {
   "get": {
    "operationId": "getApp",
    "summary": "Show an app (never its secrets)",
    "tags": [
     "admin"
    ],
    "security": [
     {
      "adminToken": []
     }
    ],
    "responses": {
     "200": {
      "description": "the app",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/App"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     }
    ]
   },
   "patch": {
    "operationId": "updateApp",
    "summary": "Change an app; rotated secrets are in this answer only",
    "tags": [
     "admin"
    ],
    "security": [
     {
      "adminToken": []
     }
    ],
    "responses": {
     "200": {
      "description": "the app",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/App"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/AppUpdate"
       }
      }
     }
    }
   },
   "delete": {
    "operationId": "deleteApp",
    "summary": "Delete an app with all its data",
    "tags": [
     "admin"
    ],
    "security": [
     {
      "adminToken": []
     }
    ],
    "responses": {
     "204": {
      "description": "deleted"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     }
    ]
   }
  },
  "/v1/apps/{app}/feedback": {
   "post": {
    "operationId": "readFeedback",
    "summary": "Read a legacy app's feedback service now",
    "tags": [
     "admin"
    ],
    "security": [
     {
      "adminToken": []
     }
    ],
    "responses": {
     "200": {
      "description": "what the service listed",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/FeedbackResult"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices": {
   "get": {
    "operationId": "listDevices",
    "summary": "A user's devices (alias), a tag's (paged), or those created in a time (paged, oldest first)",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "devices",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/DeviceList"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "alias",
      "in": "query",
      "required": false,
      "schema": {
       "type": "string",
       "minLength": 1,
       "maxLength": 128,
       "description": "1-128 bytes of UTF-8 text in Unicode NFC (composed form), without control, bidirectional-override or invisible formatting characters"
      }
     },
     {
      "name": "tag",
      "in": "query",
      "required": false,
      "schema": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,64}$"
      }
     },
     {
      "name": "createdSince",
      "in": "query",
      "required": false,
      "description": "the devices created from this time on, active or not, oldest first: what a flood of made-up registrations left",
      "schema": {
       "type": "string",
       "format": "date-time"
      }
     },
     {
      "name": "createdBefore",
      "in": "query",
      "required": false,
      "description": "with createdSince: only those created before this time",
      "schema": {
       "type": "string",
       "format": "date-time"
      }
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "description": "the cursor from the last page (next): a device id, or with createdSince the last one's creation time in milliseconds, a colon and its id",
      "schema": {
       "type": "string",
       "pattern": "^([0-9]{1,15}:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
      }
     },
     {
      "$ref": "#/components/parameters/limit"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}": {
   "put": {
    "operationId": "registerDevice",
    "summary": "Register a device, or register it again (a new token, tags, its alias)",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the device",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/Registration"
       }
      }
     }
    }
   },
   "get": {
    "operationId": "getDevice",
    "summary": "Show a device",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the device",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ]
   },
   "delete": {
    "operationId": "deleteDevice",
    "summary": "Delete a device",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "204": {
      "description": "deleted"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/alias": {
   "delete": {
    "operationId": "logOut",
    "summary": "Unbind the device from its user",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the device",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/tags": {
   "patch": {
    "operationId": "changeTags",
    "summary": "Add and remove tags",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the device",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Device"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/TagsChange"
       }
      }
     }
    }
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/push-tokens/{kind}": {
   "put": {
    "operationId": "setPushToken",
    "summary": "Set the device's VoIP (PushKit) or push-to-start (ActivityKit) token: voip pushes, and liveactivity pushes whose event is start, to the device, its user, its tags or everyone go to it",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the token as kept",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/PushToken"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     },
     {
      "$ref": "#/components/parameters/pushTokenKind"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/PushTokenChange"
       }
      }
     }
    }
   },
   "delete": {
    "operationId": "deletePushToken",
    "summary": "Remove the device's token of this kind",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "204": {
      "description": "removed"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     },
     {
      "$ref": "#/components/parameters/pushTokenKind"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/activities/{activityId}": {
   "put": {
    "operationId": "setActivityToken",
    "summary": "Register a Live Activity's update token (ActivityKit's pushTokenUpdates) under the activity's id: liveactivity pushes to audience.activity update or end it. A device keeps at most 16 activities (one more forgets its oldest), each forgotten 12 hours after it started",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the token as kept",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/ActivityToken"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     },
     {
      "$ref": "#/components/parameters/activityId"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/PushTokenChange"
       }
      }
     }
    }
   },
   "delete": {
    "operationId": "deleteActivityToken",
    "summary": "Remove the device's token for this activity (it ended on the device)",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "204": {
      "description": "removed"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     },
     {
      "$ref": "#/components/parameters/activityId"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/secret": {
   "post": {
    "operationId": "rotateDeviceSecret",
    "summary": "A new device secret; the old one stops working",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the new secret",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/DeviceSecret"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/connect": {
   "get": {
    "operationId": "connectDevice",
    "summary": "The device's own connection (the online channel): a WebSocket upgrade, or the refusal's error (JSON, then the connection closes). Without an upgrade, the credentials are checked and the answer is 426, or the same error",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "426": {
      "$ref": "#/components/responses/Error"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     },
     {
      "name": "after",
      "in": "query",
      "description": "the sequence of the last message the device has",
      "schema": {
       "type": "integer",
       "minimum": 0
      }
     }
    ]
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/opens": {
   "post": {
    "operationId": "reportOpen",
    "summary": "The device's user opened one of its messages (messageId: tern.id, or a channel frame's id), or a push that came through APNs (pushId: tern.pushId)",
    "description": "404 if the device has no such message, or was not sent that push: not in its audience as the device is now, not handed out yet, or the device is newer than the push.",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "204": {
      "description": "counted (the first open of a message or push by the device counts)"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "type": "object",
        "properties": {
         "messageId": {
          "type": "string",
          "format": "uuid"
         },
         "pushId": {
          "type": "string",
          "format": "uuid"
         }
        },
        "oneOf": [
         {
          "required": [
           "messageId"
          ]
         },
         {
          "required": [
           "pushId"
          ]
         }
        ],
        "additionalProperties": false
       }
      }
     }
    }
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/acks": {
   "post": {
    "operationId": "acknowledgeMessages",
    "summary": "The device acknowledges messages outside its connection (a Notification Service Extension's receipt), or a push that came through APNs (pushId: tern.pushId)",
    "description": "404 for a push the device was not sent, as for an open.",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "how many of the ids this call acknowledged (the device's own, not acknowledged before); for a push, 1 for the device's first receipt of it, else 0",
      "content": {
       "application/json": {
        "schema": {
         "type": "object",
         "properties": {
          "acked": {
           "type": "integer",
           "minimum": 0
          }
         },
         "required": [
          "acked"
         ]
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "type": "object",
        "properties": {
         "ids": {
          "type": "array",
          "minItems": 1,
          "maxItems": 1000,
          "items": {
           "type": "string",
           "format": "uuid"
          }
         },
         "pushId": {
          "type": "string",
          "format": "uuid"
         }
        },
        "oneOf": [
         {
          "required": [
           "ids"
          ]
         },
         {
          "required": [
           "pushId"
          ]
         }
        ],
        "additionalProperties": false
       }
      }
     }
    }
   }
  },
  "/v1/apps/{app}/devices/{deviceId}/tokens": {
   "get": {
    "operationId": "tokenHistory",
    "summary": "A device's earlier tokens",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the history",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/TokenHistory"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/deviceId"
     }
    ]
   }
  },
  "/v1/apps/{app}/pushes": {
   "get": {
    "operationId": "listPushes",
    "summary": "The app's pushes, newest first, a page at a time, by status if asked",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "a page of pushes, without their failures",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/PushList"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "status",
      "in": "query",
      "required": false,
      "schema": {
       "type": "string",
       "enum": [
        "scheduled",
        "pending",
        "sending",
        "completed"
       ]
      }
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "description": "the next of the page before",
      "schema": {
       "type": "string",
       "pattern": "^[0-9]{1,18}$"
      }
     },
     {
      "name": "limit",
      "in": "query",
      "required": false,
      "schema": {
       "type": "integer",
       "minimum": 1,
       "maximum": 100
      }
     }
    ]
   },
   "post": {
    "operationId": "createPush",
    "summary": "Store a push and deliver it, now or at sendAt; with wait, its outcome",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "201": {
      "description": "completed within wait",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Push"
        }
       }
      }
     },
     "202": {
      "description": "stored; delivering, or scheduled",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Push"
        }
       }
      }
     },
     "200": {
      "description": "the push an idempotency key made before",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Push"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "wait",
      "in": "query",
      "required": false,
      "schema": {
       "type": "integer",
       "minimum": 0,
       "maximum": 60
      },
      "description": "seconds to wait for the outcome"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/PushRequest"
       }
      }
     }
    }
   }
  },
  "/v1/apps/{app}/pushes/{pushId}": {
   "get": {
    "operationId": "getPush",
    "summary": "A push's status, counts and failures",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the push",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Push"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/pushId"
     },
     {
      "name": "failuresAfter",
      "in": "query",
      "required": false,
      "description": "the nextFailures of the page before (0 or none: from the first); failures come in the order they were committed",
      "schema": {
       "type": "string",
       "pattern": "^[0-9]{1,18}$"
      }
     }
    ]
   }
  },
  "/v1/apps/{app}/pushes/{pushId}/reports": {
   "get": {
    "operationId": "listPushReports",
    "summary": "The devices that reported a push that came through APNs: its arrival (a Notification Service Extension's receipt) and the user's open, in device id order",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "a page of the devices' reports",
      "content": {
       "application/json": {
        "schema": {
         "type": "object",
         "properties": {
          "reports": {
           "type": "array",
           "items": {
            "type": "object",
            "properties": {
             "deviceId": {
              "type": "string",
              "format": "uuid"
             },
             "receivedAt": {
              "type": "string",
              "format": "date-time"
             },
             "openedAt": {
              "type": "string",
              "format": "date-time"
             }
            },
            "required": [
             "deviceId"
            ],
            "additionalProperties": false
           }
          },
          "next": {
           "type": "string",
           "description": "the after of the next page; none after the last"
          }
         },
         "required": [
          "reports"
         ],
         "additionalProperties": false
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/pushId"
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "description": "the next of the page before (a device id)",
      "schema": {
       "type": "string",
       "format": "uuid"
      }
     },
     {
      "name": "limit",
      "in": "query",
      "required": false,
      "schema": {
       "type": "integer",
       "minimum": 1,
       "maximum": 1000
      }
     }
    ]
   }
  },
  "/v1/apps/{app}/pushes/{pushId}/cancel": {
   "post": {
    "operationId": "cancelPush",
    "summary": "Stop a push: no more of its audience is handed out; the chunks in flight finish, and it completes with them (a scheduled push is never sent)",
    "tags": [
     "backend"
    ],
    "requestBody": {
     "required": false,
     "content": {
      "application/json": {
       "schema": {
        "type": "object",
        "additionalProperties": false
       }
      }
     }
    },
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the push, with cancelledAt (again for a push cancelled before); 409 if it had completed first",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Push"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/pushId"
     }
    ]
   }
  },
  "/v1/apps/{app}/token-events": {
   "get": {
    "operationId": "tokenEvents",
    "summary": "Tokens deactivated, oldest first",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "events",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/TokenEvents"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "schema": {
       "type": "integer",
       "minimum": 0
      }
     },
     {
      "$ref": "#/components/parameters/limit"
     }
    ]
   }
  },
  "/v1/apps/{app}/activities": {
   "get": {
    "operationId": "listActivities",
    "summary": "The app's Live Activities, by id, each with how many devices follow it (have a token for it)",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "a page of activities",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/ActivityList"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "description": "the cursor from the last page (an activity id)",
      "schema": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,128}$"
      }
     },
     {
      "$ref": "#/components/parameters/limit"
     }
    ]
   }
  },
  "/v1/apps/{app}/activities/{activityId}": {
   "get": {
    "operationId": "getActivity",
    "summary": "One Live Activity and how many devices follow it (404 when none does)",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the activity",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Activity"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/activityId"
     }
    ]
   }
  },
  "/v1/apps/{app}/broadcast-channels": {
   "get": {
    "operationId": "listBroadcastChannels",
    "summary": "The app's broadcast channels (iOS 18), by name",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "a page of channels",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/BroadcastChannelList"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "description": "the cursor from the last page (a channel's name)",
      "schema": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,128}$"
      }
     },
     {
      "$ref": "#/components/parameters/limit"
     }
    ]
   }
  },
  "/v1/apps/{app}/broadcast-channels/{name}": {
   "put": {
    "operationId": "makeBroadcastChannel",
    "summary": "Makes a broadcast channel at APNs under this name (201), or answers with the one the app has under it (200; 409 when its storage or environment differ). The app subscribes its Live Activity to channelId",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/BroadcastChannelCreate"
       }
      }
     }
    },
    "responses": {
     "200": {
      "description": "the channel the app had under this name",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/BroadcastChannel"
        }
       }
      }
     },
     "201": {
      "description": "the channel, made now",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/BroadcastChannel"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/channelName"
     }
    ]
   },
   "get": {
    "operationId": "getBroadcastChannel",
    "summary": "One broadcast channel; with the app key too, so the app finds the channel of a name and subscribes its Live Activity to its channelId",
    "tags": [
     "backend",
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": []
     }
    ],
    "responses": {
     "200": {
      "description": "the channel",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/BroadcastChannel"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/channelName"
     }
    ]
   },
   "delete": {
    "operationId": "deleteBroadcastChannel",
    "summary": "Deletes the channel at APNs, for good, and forgets it (a channel APNs no longer has is forgotten all the same)",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "204": {
      "description": "deleted"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/channelName"
     }
    ],
    "description": "Refused with 409 while a scheduled push names the channel in broadcastChannel (its starts would follow a channel APNs no longer has): cancel that push first."
   }
  },
  "/v1/apps/{app}/broadcast-channels/{name}/broadcasts": {
   "post": {
    "operationId": "broadcast",
    "summary": "One broadcast: updates or ends the Live Activity on every device subscribed to the channel, in one request to APNs. Answered with APNs' answer: 409 channelNotRegistered when APNs no longer has the channel, 502 apnsRejected with its reason, 504 when it did not answer",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/BroadcastRequest"
       }
      }
     }
    },
    "responses": {
     "200": {
      "description": "APNs took it",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/BroadcastResult"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/channelName"
     }
    ]
   },
   "get": {
    "operationId": "listBroadcasts",
    "summary": "The channel's latest broadcasts (the last 100 are kept), newest first, each with what became of it; they go with their channel",
    "tags": [
     "backend"
    ],
    "security": [
     {
      "masterSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "a page of broadcasts",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/SentBroadcastList"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/channelName"
     },
     {
      "name": "before",
      "in": "query",
      "required": false,
      "description": "the cursor from the last page (a broadcast's id)",
      "schema": {
       "type": "string",
       "pattern": "^[1-9][0-9]{0,17}$"
      }
     },
     {
      "$ref": "#/components/parameters/limit"
     }
    ]
   }
  },
  "/v1/apps/{app}/inbox": {
   "get": {
    "operationId": "readInbox",
    "summary": "A user's unexpired messages, oldest first",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the inbox",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/Inbox"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/inboxDevice"
     },
     {
      "$ref": "#/components/parameters/inboxAlias"
     },
     {
      "name": "after",
      "in": "query",
      "required": false,
      "schema": {
       "type": "integer",
       "minimum": 0
      }
     },
     {
      "name": "locale",
      "in": "query",
      "required": false,
      "description": "list each message in this language (a language tag) instead of the reading device's registered locale",
      "schema": {
       "type": "string",
       "pattern": "^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8}){0,3}$",
       "maxLength": 35
      }
     },
     {
      "$ref": "#/components/parameters/limit"
     }
    ]
   }
  },
  "/v1/apps/{app}/inbox/read": {
   "post": {
    "operationId": "markRead",
    "summary": "Mark messages read",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "200": {
      "description": "the new counts",
      "content": {
       "application/json": {
        "schema": {
         "$ref": "#/components/schemas/ReadResult"
        }
       }
      }
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "$ref": "#/components/parameters/inboxDevice"
     },
     {
      "$ref": "#/components/parameters/inboxAlias"
     }
    ],
    "requestBody": {
     "required": true,
     "content": {
      "application/json": {
       "schema": {
        "$ref": "#/components/schemas/ReadRequest"
       }
      }
     }
    }
   }
  },
  "/v1/apps/{app}/inbox/{messageId}": {
   "delete": {
    "operationId": "deleteMessage",
    "summary": "Delete a message from this inbox",
    "tags": [
     "device"
    ],
    "security": [
     {
      "masterSecret": []
     },
     {
      "appKey": [],
      "deviceSecret": []
     }
    ],
    "responses": {
     "204": {
      "description": "deleted"
     },
     "default": {
      "$ref": "#/components/responses/Error"
     }
    },
    "parameters": [
     {
      "$ref": "#/components/parameters/app"
     },
     {
      "name": "messageId",
      "in": "path",
      "required": true,
      "schema": {
       "type": "string",
       "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
      }
     },
     {
      "$ref": "#/components/parameters/inboxDevice"
     },
     {
      "$ref": "#/components/parameters/inboxAlias"
     }
    ]
   }
  }
 },
 "components": {
  "schemas": {
   "Error": {
    "type": "object",
    "properties": {
     "error": {
      "type": "string"
     },
     "message": {
      "type": "string"
     },
     "field": {
      "type": "string"
     }
    },
    "required": [
     "error",
     "message"
    ],
    "additionalProperties": false,
    "description": "Every 4xx and 5xx: what went wrong and, when an input is at fault, which field"
   },
   "Status": {
    "type": "object",
    "properties": {
     "status": {
      "type": "string"
     }
    },
    "required": [
     "status"
    ]
   },
   "Credentials": {
    "oneOf": [
     {
      "type": "object",
      "properties": {
       "type": {
        "type": "string",
        "enum": [
         "token"
        ]
       },
       "keyPEM": {
        "type": "string"
       },
       "keyID": {
        "type": "string"
       },
       "teamID": {
        "type": "string"
       }
      },
      "required": [
       "type",
       "keyPEM",
       "keyID",
       "teamID"
      ],
      "additionalProperties": false
     },
     {
      "type": "object",
      "properties": {
       "type": {
        "type": "string",
        "enum": [
         "certificate"
        ]
       },
       "certificatePEM": {
        "type": "string"
       },
       "privateKeyPEM": {
        "type": "string"
       }
      },
      "required": [
       "type",
       "certificatePEM",
       "privateKeyPEM"
      ],
      "additionalProperties": false
     },
     {
      "type": "object",
      "properties": {
       "type": {
        "type": "string",
        "enum": [
         "pkcs12"
        ]
       },
       "base64": {
        "type": "string"
       },
       "passphrase": {
        "type": "string"
       }
      },
      "required": [
       "type",
       "base64",
       "passphrase"
      ],
      "additionalProperties": false
     }
    ],
    "description": "APNs credentials: a .p8 token key, a certificate and key (PEM), or a PKCS#12 bundle"
   },
   "EndpointInput": {
    "type": "object",
    "properties": {
     "host": {
      "type": "string",
      "minLength": 1,
      "maxLength": 253
     },
     "port": {
      "type": "integer",
      "minimum": 1,
      "maximum": 65535
     },
     "caPEM": {
      "type": "string"
     },
     "feedbackPort": {
      "type": "integer",
      "minimum": 1,
      "maximum": 65535
     }
    },
    "required": [
     "host",
     "port"
    ],
    "additionalProperties": false
   },
   "AppCreate": {
    "type": "object",
    "properties": {
     "id": {
      "type": "string",
      "pattern": "^[a-z0-9][a-z0-9-]{0,63}$"
     },
     "topic": {
      "type": "string",
      "minLength": 1,
      "maxLength": 255,
      "pattern": "^\\S+$"
     },
     "environment": {
      "type": "string",
      "enum": [
       "production",
       "development",
       "simulator",
       "custom"
      ]
     },
     "endpoint": {
      "$ref": "#/components/schemas/EndpointInput"
     },
     "credentials": {
      "$ref": "#/components/schemas/Credentials"
     },
     "webhookURL": {
      "type": "string",
      "maxLength": 2048
     },
     "webhookEvents": {
      "type": "array",
      "minItems": 1,
      "items": {
       "type": "string",
       "enum": [
        "token.deactivated",
        "push.opened"
       ]
      },
      "description": "what the webhook posts: token.deactivated (the default), push.opened (the opens the app reports)"
     },
     "inboxMaxTTL": {
      "type": "integer",
      "minimum": 60,
      "maximum": 2592000
     },
     "inboxCap": {
      "type": "integer",
      "minimum": 1,
      "maximum": 100000
     },
     "transport": {
      "type": "string",
      "enum": [
       "http2",
       "legacy"
      ]
     },
     "feedbackInterval": {
      "type": "integer",
      "minimum": 300,
      "maximum": 604800
     },
     "userBinding": {
      "type": "string",
      "enum": [
       "signed",
       "open"
      ]
     },
     "broadcastRatePerSecond": {
      "type": "integer",
      "minimum": 1,
      "maximum": 100000,
      "description": "throttles the app's broadcasts (pushes to tags or to everyone) that give no ratePerSecond of their own"
     }
    },
    "required": [
     "id",
     "topic",
     "environment"
    ],
    "additionalProperties": false
   },
   "AppUpdate": {
    "type": "object",
    "properties": {
     "topic": {
      "type": "string",
      "minLength": 1,
      "maxLength": 255,
      "pattern": "^\\S+$"
     },
     "environment": {
      "type": "string",
      "enum": [
       "production",
       "development",
       "simulator",
       "custom"
      ]
     },
     "endpoint": {
      "$ref": "#/components/schemas/EndpointInput"
     },
     "credentials": {
      "$ref": "#/components/schemas/Credentials"
     },
     "webhookURL": {
      "type": "string",
      "maxLength": 2048
     },
     "webhookEvents": {
      "type": "array",
      "minItems": 1,
      "items": {
       "type": "string",
       "enum": [
        "token.deactivated",
        "push.opened"
       ]
      },
      "description": "what the webhook posts: token.deactivated (the default), push.opened (the opens the app reports)"
     },
     "inboxMaxTTL": {
      "type": "integer",
      "minimum": 60,
      "maximum": 2592000
     },
     "inboxCap": {
      "type": "integer",
      "minimum": 1,
      "maximum": 100000
     },
     "transport": {
      "type": "string",
      "enum": [
       "http2",
       "legacy"
      ]
     },
     "feedbackInterval": {
      "type": "integer",
      "minimum": 300,
      "maximum": 604800
     },
     "userBinding": {
      "type": "string",
      "enum": [
       "signed",
       "open"
      ]
     },
     "broadcastRatePerSecond": {
      "type": "integer",
      "minimum": 0,
      "maximum": 100000,
      "description": "as for a new app; 0 removes it"
     },
     "rotate": {
      "type": "array",
      "items": {
       "type": "string",
       "enum": [
        "appKey",
        "masterSecret",
        "identitySecret",
        "webhookSecret"
       ]
      }
     }
    },
    "additionalProperties": false
   },
   "App": {
    "type": "object",
    "properties": {
     "id": {
      "type": "string"
     },
     "topic": {
      "type": "string"
     },
     "environment": {
      "type": "string"
     },
     "endpoint": {
      "type": "object",
      "properties": {
       "host": {
        "type": "string"
       },
       "port": {
        "type": "integer"
       },
       "customCA": {
        "type": "boolean"
       },
       "feedbackPort": {
        "type": "integer"
       }
      },
      "required": [
       "host",
       "port",
       "customCA"
      ],
      "additionalProperties": false
     },
     "credentials": {
      "type": "object",
      "properties": {
       "type": {
        "type": "string"
       },
       "keyID": {
        "type": "string"
       },
       "teamID": {
        "type": "string"
       },
       "certificateExpiresAt": {
        "type": "string",
        "format": "date-time",
        "description": "A certificate's or PKCS#12 bundle's end of validity (its notValidAfter): APNs refuses it after that"
       },
       "certificateEnvironments": {
        "type": "array",
        "items": {
         "type": "string",
         "enum": [
          "production",
          "development"
         ]
        },
        "description": "The APNs environments an Apple push certificate is for: APNs refuses it for a token of another"
       },
       "certificateTopics": {
        "type": "array",
        "items": {
         "type": "string"
        },
        "description": "The topics an Apple push certificate may push to: the bundle id, and its .voip or .complication forms"
       }
      },
      "required": [
       "type"
      ],
      "additionalProperties": false
     },
     "webhookURL": {
      "type": "string"
     },
     "webhookEvents": {
      "type": "array",
      "items": {
       "type": "string"
      }
     },
     "inboxMaxTTL": {
      "type": "integer"
     },
     "inboxCap": {
      "type": "integer"
     },
     "transport": {
      "type": "string",
      "enum": [
       "http2",
       "legacy"
      ]
     },
     "feedbackInterval": {
      "type": "integer"
     },
     "feedbackPolledAt": {
      "type": "string",
      "format": "date-time"
     },
     "userBinding": {
      "type": "string",
      "enum": [
       "signed",
       "open"
      ]
     },
     "broadcastRatePerSecond": {
      "type": "integer",
      "description": "the rate the app's broadcasts that give none are throttled to"
     },
     "hasIdentitySecret": {
      "type": "boolean"
     },
     "createdAt": {
      "type": "string",
      "format": "date-time"
     },
     "updatedAt": {
      "type": "string",
      "format": "date-time"
     },
     "appKey": {
      "type": "string",
      "description": "only in the answer that made it"
     },
     "masterSecret": {
      "type": "string",
      "description": "only in the answer that made it"
     },
     "identitySecret": {
      "type": "string",
      "description": "only in the answer that made it"
     },
     "webhookSecret": {
      "type": "string",
      "description": "when the webhook URL is set"
     },
     "unboundAliases": {
      "type": "integer",
      "minimum": 0,
      "description": "in the answer of the PATCH that switched userBinding from open to signed: the devices whose alias was bound without an alias token meanwhile, unbound now"
     }
    },
    "required": [
     "id",
     "topic",
     "environment",
     "credentials",
     "webhookEvents",
     "inboxMaxTTL",
     "inboxCap",
     "transport",
     "userBinding",
     "hasIdentitySecret",
     "createdAt",
     "updatedAt"
    ],
    "additionalProperties": false
   },
   "AppList": {
    "type": "object",
    "properties": {
     "apps": {
      "type": "array",
      "items": {
       "$ref": "#/components/schemas/App"
      }
     }
    },
    "required": [
     "apps"
    ],
    "additionalProperties": false
   },
   "FeedbackResult": {
    "type": "object",
    "properties": {
     "listed": {
      "type": "integer"
     },
     "deactivated": {
      "type": "integer"
     },
     "kept": {
      "type": "integer"
     }
    },
    "required": [
     "listed",
     "deactivated",
     "kept"
    ],
    "additionalProperties": false
   },
   "Registration": {
    "type": "object",
    "properties": {
     "token": {
      "type": "string",
      "pattern": "^[0-9a-fA-F]{2,200}$",
      "description": "the APNs device token in hex (32 bytes today)"
     },
     "environment": {
      "type": "string",
      "enum": [
       "production",
       "development"
      ]
     },
     "alias": {
      "type": "string",
      "minLength": 1,
      "maxLength": 128,
      "description": "1-128 bytes of UTF-8 text in Unicode NFC (composed form), without control, bidirectional-override or invisible formatting characters"
     },
     "aliasToken": {
      "type": "string",
      "minLength": 1,
      "maxLength": 4096,
      "description": "JWT (HS256) signed with the app's identity secret: sub the alias, aud the app id, exp at most an hour ahead"
     },
     "tags": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,64}$"
      },
      "maxItems": 100
     },
     "locale": {
      "type": "string",
      "maxLength": 35,
      "description": "text without control or invisible formatting characters"
     },
     "timezone": {
      "type": "string",
      "maxLength": 64,
      "description": "text without control or invisible formatting characters"
     },
     "appVersion": {
      "type": "string",
      "maxLength": 64,
      "description": "text without control or invisible formatting characters"
     }
    },
    "required": [
     "token",
     "environment"
    ],
    "additionalProperties": false
   },
   "Device": {
    "type": "object",
    "properties": {
     "deviceId": {
      "type": "string",
      "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
     },
     "token": {
      "type": "string"
     },
     "environment": {
      "type": "string"
     },
     "alias": {
      "type": "string"
     },
     "tags": {
      "type": "array",
      "items": {
       "type": "string"
      }
     },
     "locale": {
      "type": "string"
     },
     "timezone": {
      "type": "string"
     },
     "appVersion": {
      "type": "string"
     },
     "active": {
      "type": "boolean"
     },
     "lastRegisteredAt": {
      "type": "string",
      "format": "date-time"
     },
     "deactivatedAt": {
      "type": "string",
      "format": "date-time"
     },
     "deactivationReason": {
      "type": "string"
     },
     "createdAt": {
      "type": "string",
      "format": "date-time"
     },
     "deviceSecret": {
      "type": "string",
      "description": "only in the answer of the registration that made the device"
     },
     "pushTokens": {
      "type": "object",
      "description": "in reads (GET …/devices/{deviceId} and the listings), not in a registration's answer: the device's tokens of other kinds, by kind",
      "additionalProperties": {
       "$ref": "#/components/schemas/PushToken"
      }
     },
     "activities": {
      "type": "array",
      "description": "in reads, not in a registration's answer: the Live Activities the device registered an update token for, oldest first",
      "items": {
       "$ref": "#/components/schemas/ActivityToken"
      }
     }
    },
    "required": [
     "deviceId",
     "token",
     "environment",
     "tags",
     "active",
     "lastRegisteredAt",
     "createdAt"
    ],
    "additionalProperties": false
   },
   "PushList": {
    "type": "object",
    "properties": {
     "pushes": {
      "type": "array",
      "items": {
       "$ref": "#/components/schemas/Push"
      }
     },
     "next": {
      "type": "string"
     }
    },
    "required": [
     "pushes"
    ],
    "additionalProperties": false
   },
   "DeviceList": {
    "type": "object",
    "properties": {
     "devices": {
      "type": "array",
      "items": {
       "$ref": "#/components/schemas/Device"
      }
     },
     "next": {
      "type": "string"
     }
    },
    "required": [
     "devices"
    ],
    "additionalProperties": false
   },
   "PushTokenChange": {
    "type": "object",
    "properties": {
     "token": {
      "type": "string",
      "description": "the token in hex, as PushKit or ActivityKit gives it (1-100 bytes)"
     }
    },
    "required": [
     "token"
    ],
    "additionalProperties": false
   },
   "PushToken": {
    "type": "object",
    "properties": {
     "kind": {
      "type": "string",
      "enum": [
       "voip",
       "pushToStart"
      ]
     },
     "token": {
      "type": "string"
     },
     "active": {
      "type": "boolean",
      "description": "false once APNs called it dead; registering it again makes it active"
     },
     "registeredAt": {
      "type": "string",
      "format": "date-time"
     },
     "deactivatedAt": {
      "type": "string",
      "format": "date-time"
     },
     "deactivationReason": {
      "type": "string"
     }
    },
    "required": [
     "kind",
     "token",
     "active",
     "registeredAt"
    ],
    "additionalProperties": false
   },
   "ActivityToken": {
    "type": "object",
    "properties": {
     "activityId": {
      "type": "string"
     },
     "token": {
      "type": "string"
     },
     "startedAt": {
      "type": "string",
      "format": "date-time",
      "description": "when the device first registered a token for the activity"
     },
     "registeredAt": {
      "type": "string",
      "format": "date-time",
      "description": "when it registered this token: a 410 older than this does not remove it"
     },
     "expiresAt": {
      "type": "string",
      "format": "date-time",
      "description": "when Tern forgets it: 12 hours after the start (8 running, 4 on the Lock Screen)"
     }
    },
    "required": [
     "activityId",
     "token",
     "startedAt",
     "registeredAt",
     "expiresAt"
    ],
    "additionalProperties": false
   },
   "Activity": {
    "type": "object",
    "properties": {
     "activityId": {
      "type": "string"
     },
     "devices": {
      "type": "integer",
      "minimum": 1,
      "description": "devices with a token for it (a push passes over those whose device token is deactivated)"
     },
     "firstStartedAt": {
      "type": "string",
      "format": "date-time"
     },
     "lastRegisteredAt": {
      "type": "string",
      "format": "date-time"
     }
    },
    "required": [
     "activityId",
     "devices",
     "firstStartedAt",
     "lastRegisteredAt"
    ],
    "additionalProperties": false
   },
   "ActivityList": {
    "type": "object",
    "properties": {
     "activities": {
      "type": "array",
      "items": {
       "$ref": "#/components/schemas/Activity"
      }
     },
     "next": {
      "type": "string"
     }
    },
    "required": [
     "activities"
    ],
    "additionalProperties": false
   },
   "BroadcastChannelCreate": {
    "type": "object",
    "properties": {
     "storage": {
      "type": "string",
      "enum": [
       "none",
       "mostRecent"
      ],
      "description": "none: APNs keeps nothing for a device that is offline (a broadcast's expiration is 0); mostRecent: it keeps the last broadcast up to 8 hours. Fixed once made"
     },
     "environment": {
      "type": "string",
      "enum": [
       "production",
       "development"
      ],
      "description": "for an app on Apple's APNs: the environment the channel belongs to (the app's by default); an app on the built-in simulator or a custom endpoint has one, and takes no environment"
     }
    },
    "required": [
     "storage"
    ],
    "additionalProperties": false
   },
   "BroadcastChannel": {
    "type": "object",
    "properties": {
     "name": {
      "type": "string"
     },
     "channelId": {
      "type": "string",
      "description": "APNs' id (base64), which the app subscribes its Live Activity to"
     },
     "environment": {
      "type": "string",
      "enum": [
       "production",
       "development"
      ]
     },
     "storage": {
      "type": "string",
      "enum": [
       "none",
       "mostRecent"
      ]
     },
     "createdAt": {
      "type": "string",
      "format": "date-time"
     }
    },
    "required": [
     "name",
     "channelId",
     "environment",
     "storage",
     "createdAt"
    ],
    "additionalProperties": false
   },
   "BroadcastChannelList": {
    "type": "object",
    "properties": {
     "channels": {
      "type": "array",
      "items": {
       "$ref": "#/components/schemas/BroadcastChannel"
      }
     },
     "next": {
      "type": "string"
     }
    },
    "required": [
     "channels"
    ],
    "additionalProperties": false
   },
   "BroadcastRequest": {
    "type": "object",
    "properties": {
     "payload": {
      "type": "object",
      "description": "the whole payload, at most 5,120 bytes: aps with event (update or end; a channel cannot start an activity), timestamp and content-state"
     },
     "priority": {
      "type": "integer",
      "enum": [
       10,
       5
      ],
      "description": "10 by default"
     },
     "expiration": {
      "type": "integer",
      "minimum": 0,
      "maximum": 4294967295,
      "description": "epoch seconds until which a storing channel keeps it (8 hours from now by default); 0, or left out, on a channel that stores nothing"
     }
    },
    "required": [
     "payload"
    ],
    "additionalProperties": false
   },
   "BroadcastResult": {
    "type": "object",
    "properties": {
     "channel": {
      "type": "string"
     },
     "channelId": {
      "type": "string"
     },
     "requestId": {
      "type": "string",
      "description": "apns-request-id, as APNs answered"
     },
     "uniqueId": {
      "type": "string",
      "description": "apns-unique-id, which Apple's push console finds the broadcast by"
     },
     "attempts": {
      "type": "integer",
      "minimum": 1
     },
     "id": {
      "type": "string",
      "pattern": "^[0-9]+$",
      "description": "its number in the channel's history (GET …/broadcasts); absent when it could not be recorded (it was sent all the same)"
     }
    },
    "required": [
     "channel",
     "channelId",
     "attempts"
    ],
    "additionalProperties": false
   },
   "TagsChange": {
    "type": "object",
    "description": "tags to add and remove, removals last; a device has at most 100 tags (409 tooManyTags past that, with nothing changed)",
    "properties": {
     "add": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,64}$"
      },
      "maxItems": 100
     },
     "remove": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,64}$"
      },
      "maxItems": 100
     }
    },
    "additionalProperties": false
   },
   "DeviceSecret": {
    "type": "object",
    "properties": {
     "deviceId": {
      "type": "string",
      "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
     },
     "deviceSecret": {
      "type": "string"
     }
    },
    "required": [
     "deviceId",
     "deviceSecret"
    ],
    "additionalProperties": false
   },
   "TokenHistory": {
    "type": "object",
    "properties": {
     "tokens": {
      "type": "array",
      "items": {
       "type": "object",
       "properties": {
        "token": {
         "type": "string"
        },
        "environment": {
         "type": "string"
        },
        "firstRegisteredAt": {
         "type": "string",
         "format": "date-time"
        },
        "replacedAt": {
         "type": "string",
         "format": "date-time"
        },
        "reason": {
         "type": "string",
         "enum": [
          "replaced",
          "moved"
         ]
        }
       },
       "required": [
        "token",
        "environment",
        "firstRegisteredAt",
        "replacedAt",
        "reason"
       ],
       "additionalProperties": false
      }
     }
    },
    "required": [
     "tokens"
    ],
    "additionalProperties": false
   },
   "Audience": {
    "type": "object",
    "properties": {
     "tokens": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[0-9a-fA-F]{2,200}$",
       "description": "the APNs device token in hex (32 bytes today)"
      }
     },
     "devices": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
      }
     },
     "aliases": {
      "type": "array",
      "items": {
       "type": "string",
       "minLength": 1,
       "maxLength": 128,
       "description": "1-128 bytes of UTF-8 text in Unicode NFC (composed form), without control, bidirectional-override or invisible formatting characters"
      }
     },
     "tags": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[A-Za-z0-9._:-]{1,64}$"
      }
     },
     "match": {
      "type": "string",
      "enum": [
       "any",
       "all"
      ],
      "description": "any (the default): devices with any of the tags; all: devices with every one of them, which takes at most 100 tags (what a device can carry)"
     },
     "all": {
      "type": "boolean",
      "enum": [
       true
      ]
     },
     "activity": {
      "type": "string",
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "description": "a Live Activity's id: the update tokens devices registered for it (PUT …/devices/{deviceId}/activities/{activityId}); with aliases, only their devices'. The push is a liveactivity push whose raw payload's aps.event is update or end, with aps.timestamp and aps.content-state, through APNs and with no inbox"
     },
     "filters": {
      "$ref": "#/components/schemas/AudienceFilters"
     }
    },
    "additionalProperties": false,
    "description": "Exactly one of tokens, devices, aliases, tags (with match), all, or activity (alone or with aliases); with devices, aliases, tags or all, filters as well"
   },
   "Notification": {
    "type": "object",
    "properties": {
     "title": {
      "type": "string"
     },
     "subtitle": {
      "type": "string"
     },
     "body": {
      "type": "string"
     },
     "badge": {
      "oneOf": [
       {
        "type": "integer",
        "minimum": 0,
        "maximum": 99999
       },
       {
        "type": "string",
        "pattern": "^(unread|\\+[1-9][0-9]{0,4})$"
       }
      ]
     },
     "sound": {
      "type": "string"
     },
     "category": {
      "type": "string"
     },
     "threadID": {
      "type": "string"
     },
     "contentAvailable": {
      "type": "boolean"
     },
     "mutableContent": {
      "type": "boolean"
     },
     "interruptionLevel": {
      "type": "string",
      "enum": [
       "passive",
       "active",
       "time-sensitive",
       "critical"
      ]
     },
     "data": {
      "type": "object",
      "description": "keys beside aps; not tern, which carries the push's id (tern.pushId) and its inbox message's (tern.messageId)"
     },
     "localizations": {
      "type": "object",
      "description": "the title, subtitle and body in other languages, by language tag (ko, zh-Hans, pt-BR; at most 100): each device gets the language its registered locale picks (its own tag, else the tag with its last subtags dropped: zh-Hans-CN, zh-Hans, zh), or this notification's texts when none does; a field a language leaves out is the notification's",
      "maxProperties": 100,
      "propertyNames": {
       "pattern": "^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}$",
       "maxLength": 35
      },
      "additionalProperties": {
       "type": "object",
       "properties": {
        "title": {
         "type": "string"
        },
        "subtitle": {
         "type": "string"
        },
        "body": {
         "type": "string"
        }
       },
       "minProperties": 1,
       "additionalProperties": false
      }
     }
    },
    "additionalProperties": false
   },
   "APNsOptions": {
    "type": "object",
    "properties": {
     "pushType": {
      "type": "string",
      "description": "apns-push-type (default alert). Types with tokens of their own (voip, complication, fileprovider, liveactivity, location, pushtotalk, widgets, controls, mdm) go to audience.tokens, and their answers deactivate no device; but voip, and liveactivity whose payload's aps.event is start, may also go to devices, aliases, tags or everyone: to each device's voip or pushToStart token (PUT …/devices/{deviceId}/push-tokens/{kind}), passing over devices without one, and a dead one is deactivated; and a liveactivity update or end goes to audience.activity, the tokens devices registered for that activity"
     },
     "priority": {
      "type": "integer",
      "enum": [
       10,
       5,
       1
      ]
     },
     "expiration": {
      "type": "integer",
      "minimum": 0,
      "maximum": 4294967295
     },
     "collapseID": {
      "type": "string",
      "minLength": 1,
      "maxLength": 64,
      "pattern": "^[^\\u0000-\\u001f\\u007f]+$"
     }
    },
    "additionalProperties": false
   },
   "PushRequest": {
    "type": "object",
    "properties": {
     "audience": {
      "$ref": "#/components/schemas/Audience"
     },
     "notification": {
      "$ref": "#/components/schemas/Notification"
     },
     "payload": {
      "type": "object",
      "description": "a raw APNs payload, instead of notification"
     },
     "apns": {
      "$ref": "#/components/schemas/APNsOptions"
     },
     "inbox": {
      "type": "object",
      "properties": {
       "ttl": {
        "type": "integer",
        "minimum": 1
       }
      },
      "additionalProperties": false
     },
     "idempotencyKey": {
      "type": "string",
      "minLength": 1,
      "maxLength": 128
     },
     "delivery": {
      "type": "string",
      "enum": [
       "apns",
       "online",
       "auto"
      ]
     },
     "wake": {
      "type": "boolean",
      "description": "with delivery online: an offline device also gets a silent push"
     },
     "ackTimeout": {
      "type": "number",
      "minimum": 0.1,
      "maximum": 60,
      "description": "with delivery auto: seconds before an unacknowledged message goes through APNs"
     },
     "sendAt": {
      "type": "string",
      "format": "date-time",
      "description": "when to send it (RFC 3339, with its offset), at most 90 days ahead; until then its status is scheduled. A time already past sends it now"
     },
     "ratePerSecond": {
      "type": "integer",
      "minimum": 0,
      "maximum": 100000,
      "description": "throttles it: at most this many recipients a second, across every node, a second's worth at a time. A throttled push is out of its app's order: it holds none of the app's later pushes back (a later one may reach a device first). Absent: a broadcast (tags or everyone) takes the app's broadcastRatePerSecond, if it has one; 0: not throttled"
     },
     "broadcastChannel": {
      "type": "string",
      "pattern": "^[A-Za-z0-9._:-]{1,128}$",
      "description": "a push that starts a Live Activity (a raw payload with aps.event start, to push-to-start tokens): the name of one of the app's broadcast channels, whose APNs id goes in aps.input-push-channel, so that each activity started follows the channel's broadcasts"
     }
    },
    "required": [
     "audience"
    ],
    "additionalProperties": false
   },
   "Push": {
    "type": "object",
    "properties": {
     "id": {
      "type": "string",
      "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
     },
     "status": {
      "type": "string",
      "enum": [
       "scheduled",
       "pending",
       "sending",
       "completed"
      ]
     },
     "idempotencyKey": {
      "type": "string"
     },
     "counts": {
      "type": "object",
      "properties": {
       "targeted": {
        "type": "integer"
       },
       "accepted": {
        "type": "integer"
       },
       "failed": {
        "type": "integer"
       },
       "pruned": {
        "type": "integer"
       },
       "failedByReason": {
        "type": "object",
        "additionalProperties": {
         "type": "integer"
        }
       },
       "inboxDropped": {
        "type": "integer"
       },
       "deliveredOnline": {
        "type": "integer"
       },
       "acked": {
        "type": "integer"
       },
       "fellBackToAPNs": {
        "type": "integer"
       },
       "ackedAfterFallback": {
        "type": "integer"
       },
       "received": {
        "type": "integer",
        "description": "of a push through APNs only (delivery apns): devices whose Notification Service Extension reported its arrival (POST …/devices/{deviceId}/acks with pushId), each once"
       },
       "opened": {
        "type": "integer",
        "description": "devices whose app reported the user's open (POST …/devices/{deviceId}/opens), each once; of an online or auto push, its messages opened"
       }
      },
      "required": [
       "targeted",
       "accepted",
       "failed",
       "pruned",
       "failedByReason",
       "inboxDropped",
       "opened"
      ],
      "additionalProperties": false
     },
     "createdAt": {
      "type": "string",
      "format": "date-time"
     },
     "finishedAt": {
      "type": "string",
      "format": "date-time"
     },
     "cancelledAt": {
      "type": "string",
      "format": "date-time"
     },
     "sendAt": {
      "type": "string",
      "format": "date-time",
      "description": "when a scheduled push is (or was) to be sent"
     },
     "ratePerSecond": {
      "type": "integer",
      "description": "a throttled push's recipients a second at most"
     },
     "failureDetails": {
      "type": "object",
      "additionalProperties": {
       "type": "string",
       "maxLength": 500
      },
      "description": "by failure reason, what the reason alone does not say, from the first failure that said it: the last connect error behind connectionFailed or timedOut, why the app has no APNs client (clientUnavailable), why a token APNs refused outright was not deactivated; absent when no failure had one"
     },
     "failures": {
      "type": "array",
      "items": {
       "type": "object",
       "properties": {
        "deviceId": {
         "type": "string"
        },
        "token": {
         "type": "string"
        },
        "status": {
         "type": "integer"
        },
        "reason": {
         "type": "string"
        },
        "at": {
         "type": "string",
         "format": "date-time"
        }
       },
       "required": [
        "token",
        "reason",
        "at"
       ],
       "additionalProperties": false
      }
     },
     "nextFailures": {
      "type": "string",
      "description": "the failuresAfter of the next page of failures; while the push has not completed, also on the last page so far: where the failures still to come begin"
     },
     "audience": {
      "allOf": [
       {
        "$ref": "#/components/schemas/Audience"
       }
      ],
      "description": "whom the push goes to, as it was given (lists sorted, each entry once), with its filters: in the view of one push (GET …/pushes/{id}), not in a list of them or in the answer to its POST"
     }
    },
    "required": [
     "id",
     "status",
     "counts",
     "createdAt"
    ],
    "additionalProperties": false
   },
   "TokenEvents": {
    "type": "object",
    "properties": {
     "events": {
      "type": "array",
      "items": {
       "type": "object",
       "properties": {
        "id": {
         "type": "integer"
        },
        "deviceId": {
         "type": "string"
        },
        "token": {
         "type": "string"
        },
        "reason": {
         "type": "string"
        },
        "apnsTimestamp": {
         "type": "string",
         "format": "date-time"
        },
        "occurredAt": {
         "type": "string",
         "format": "date-time"
        }
       },
       "required": [
        "id",
        "deviceId",
        "token",
        "reason",
        "occurredAt"
       ],
       "additionalProperties": false
      }
     },
     "next": {
      "type": "string"
     }
    },
    "required": [
     "events"
    ],
    "additionalProperties": false
   },
   "Inbox": {
    "type": "object",
    "properties": {
     "messages": {
      "type": "array",
      "items": {
       "type": "object",
       "properties": {
        "id": {
         "type": "string",
         "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
        },
        "sequence": {
         "type": "integer"
        },
        "title": {
         "type": "string"
        },
        "body": {
         "type": "string"
        },
        "data": {},
        "createdAt": {
         "type": "string",
         "format": "date-time"
        },
        "expiresAt": {
         "type": "string",
         "format": "date-time"
        },
        "read": {
         "type": "boolean"
        },
        "readAt": {
         "type": "string",
         "format": "date-time"
        }
       },
       "required": [
        "id",
        "sequence",
        "createdAt",
        "expiresAt",
        "read"
       ],
       "additionalProperties": false
      }
     },
     "next": {
      "type": "string"
     },
     "unread": {
      "type": "integer"
     }
    },
    "required": [
     "messages",
     "unread"
    ],
    "additionalProperties": false
   },
   "ReadRequest": {
    "type": "object",
    "properties": {
     "upTo": {
      "type": "string",
      "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
     },
     "ids": {
      "type": "array",
      "items": {
       "type": "string",
       "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
      },
      "maxItems": 1000
     },
     "updateBadge": {
      "type": "boolean"
     }
    },
    "additionalProperties": false
   },
   "ReadResult": {
    "type": "object",
    "properties": {
     "marked": {
      "type": "integer"
     },
     "unread": {
      "type": "integer"
     }
    },
    "required": [
     "marked",
     "unread"
    ],
    "additionalProperties": false
   },
   "SentBroadcast": {
    "type": "object",
    "properties": {
     "id": {
      "type": "string",
      "pattern": "^[0-9]+$"
     },
     "sentAt": {
      "type": "string",
      "format": "date-time"
     },
     "result": {
      "type": "string",
      "enum": [
       "delivered",
       "rejected",
       "failed"
      ],
      "description": "delivered: APNs took it; rejected: APNs refused it (reason is APNs' reason); failed: no answer (reason is the error the call was answered with, such as apnsTimedOut)"
     },
     "reason": {
      "type": "string"
     },
     "priority": {
      "type": "integer",
      "enum": [
       5,
       10
      ]
     },
     "expiration": {
      "type": "integer",
      "minimum": 0,
      "description": "epoch seconds; 0 for at once"
     },
     "payload": {
      "type": "object",
      "description": "the payload as sent"
     },
     "requestId": {
      "type": "string"
     },
     "uniqueId": {
      "type": "string",
      "description": "apns-unique-id, which Apple's push console finds the broadcast by"
     },
     "attempts": {
      "type": "integer",
      "minimum": 0
     }
    },
    "required": [
     "id",
     "sentAt",
     "result",
     "priority",
     "expiration",
     "payload",
     "attempts"
    ],
    "additionalProperties": false
   },
   "SentBroadcastList": {
    "type": "object",
    "properties": {
     "broadcasts": {
      "type": "array",
      "items": {
       "$ref": "#/components/schemas/SentBroadcast"
      }
     },
     "next": {
      "type": "string",
      "pattern": "^[0-9]+$"
     }
    },
    "required": [
     "broadcasts"
    ],
    "additionalProperties": false
   },
   "AudienceFilters": {
    "type": "object",
    "additionalProperties": false,
    "minProperties": 1,
    "description": "Only the audience's devices that registered so: a device passes when it meets every condition given, as it is registered when its part of the audience is handed out. A device that registered no appVersion or no locale meets no condition on it.",
    "properties": {
     "appVersion": {
      "type": "object",
      "additionalProperties": false,
      "minProperties": 1,
      "description": "the versions from atLeast (included) to below (excluded), compared number by number (2.3 is 2.3.0 and below 2.10); a device's registered appVersion is read as the numbers and dots it begins with (2.3.1 (45) is 2.3.1)",
      "properties": {
       "atLeast": {
        "type": "string",
        "pattern": "^[0-9]{1,9}(\\.[0-9]{1,9}){0,3}$"
       },
       "below": {
        "type": "string",
        "pattern": "^[0-9]{1,9}(\\.[0-9]{1,9}){0,3}$",
        "description": "a later version than atLeast"
       }
      }
     },
     "languages": {
      "type": "array",
      "minItems": 1,
      "maxItems": 100,
      "items": {
       "type": "string",
       "pattern": "^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}$",
       "maxLength": 35
      },
      "description": "language tags, each once (case does not matter): a device passes when its registered locale looks one up as it would a push's localizations (its own tag, then with its last subtags dropped; zh-TW also looks for zh-Hant), so ko takes ko-KR and zh-Hant takes zh-TW"
     },
     "registeredSince": {
      "type": "string",
      "format": "date-time",
      "description": "RFC 3339 with its offset, not in the future: devices registered at or after it (an app built with TernKit registers at the first launch of each day, or sooner when its token, version, locale or time zone changed)"
     }
    }
   }
  },
  "parameters": {
   "app": {
    "name": "app",
    "in": "path",
    "required": true,
    "schema": {
     "type": "string",
     "pattern": "^[a-z0-9][a-z0-9-]{0,63}$"
    }
   },
   "pushId": {
    "name": "pushId",
    "in": "path",
    "required": true,
    "schema": {
     "type": "string",
     "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    }
   },
   "deviceId": {
    "name": "deviceId",
    "in": "path",
    "required": true,
    "schema": {
     "type": "string",
     "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    }
   },
   "pushTokenKind": {
    "name": "kind",
    "in": "path",
    "required": true,
    "schema": {
     "type": "string",
     "enum": [
      "voip",
      "pushToStart"
     ]
    }
   },
   "activityId": {
    "name": "activityId",
    "in": "path",
    "required": true,
    "description": "the Live Activity's id, which the app chooses (a match, an order)",
    "schema": {
     "type": "string",
     "pattern": "^[A-Za-z0-9._:-]{1,128}$"
    }
   },
   "channelName": {
    "name": "name",
    "in": "path",
    "required": true,
    "description": "the channel's name, as the app's backend gave it",
    "schema": {
     "type": "string",
     "pattern": "^[A-Za-z0-9._:-]{1,128}$"
    }
   },
   "limit": {
    "name": "limit",
    "in": "query",
    "required": false,
    "schema": {
     "type": "integer",
     "minimum": 1,
     "maximum": 1000
    }
   },
   "inboxDevice": {
    "name": "deviceId",
    "in": "query",
    "required": false,
    "schema": {
     "type": "string",
     "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    },
    "description": "whose inbox: this device's user (the app key needs this and its X-Tern-Device-Secret)"
   },
   "inboxAlias": {
    "name": "alias",
    "in": "query",
    "required": false,
    "schema": {
     "type": "string",
     "minLength": 1,
     "maxLength": 128,
     "description": "1-128 bytes of UTF-8 text in Unicode NFC (composed form), without control, bidirectional-override or invisible formatting characters"
    },
    "description": "whose inbox: this user's (master secret)"
   }
  },
  "responses": {
   "Error": {
    "description": "a refusal or failure, in the one error shape",
    "content": {
     "application/json": {
      "schema": {
       "$ref": "#/components/schemas/Error"
      }
     }
    }
   }
  },
  "securitySchemes": {
   "adminToken": {
    "type": "http",
    "scheme": "bearer",
    "description": "the admin token: app management"
   },
   "masterSecret": {
    "type": "http",
    "scheme": "bearer",
    "description": "an app's master secret: its backend"
   },
   "appKey": {
    "type": "http",
    "scheme": "bearer",
    "description": "an app's app key: it ships in the app, so it is public"
   },
   "metricsToken": {
    "type": "http",
    "scheme": "bearer",
    "description": "the node's http.metricsToken, when it is set: GET /metrics"
   },
   "deviceSecret": {
    "type": "apiKey",
    "in": "header",
    "name": "X-Tern-Device-Secret",
    "description": "a device's secret, from its first registration"
   }
  }
 }
}
"""#
}
