# IO and IC sources (owned by the io/ic modules).
