# IO and IC tests (owned by the io/ic modules).
